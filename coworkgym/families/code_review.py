"""Reviewing a proposed change (a unified diff against a small Python repository) into a
review JSON that flags the real defects — by file, line and kind — and nothing else.

Grounded in a repository this family writes itself (CC0): a parcel-shipping calculator
(weight bands, zones, units, orders, labels). The patch mixes planted defects (a boundary
moved, a unit off by ten, a comparison with the wrong variable, a dropped check) with
harmless refactors that look suspicious (a loop replaced by ``max`` with a key, which keeps
the first of ties). The hard variant adds a defect visible only across files: the patch
swaps a function's parameters and the callers it does not touch still pass them in the old
order.

Later user turns either replace the patch with the author's second version (one defect
fixed, another introduced, lines moved) or add a requirement: new functions without a
docstring are flagged too.
"""

from __future__ import annotations

import difflib
import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..package.cowork import TurnPatch
from ..verifier.spec import Component, CustomScript, VerifierSpec
from .base import Trap
from .common import (
    CHECK_PRELUDE,
    FamilyDraft,
    FamilyParams,
    Format,
    Reading,
    TaskFamily,
    expectations,
    fill_template,
    input_artifacts,
    input_turn,
    inputs_unmodified,
    json_value,
    output_artifacts,
    plan_turns,
    python_solution,
    requirement_added,
    requirement_turn,
    rubric,
    sha256,
    user_state,
    verifier_output,
    when_delivered,
)

PATCH, REVIEW = "change.patch", "review.json"
EXPECTED = "expected_review.json"
KINDS = ("off_by_one", "wrong_operator", "unit_error", "wrong_variable", "missing_check",
         "api_mismatch")
DOCSTRING_KIND = "missing_docstring"

REPO = {
    "repo/parcel/__init__.py": '"""Parcel shipping: rates, units, orders and labels."""\n',
    "repo/parcel/rates.py": '''\
"""Shipping rates by weight band and zone."""

BANDS = [(0.5, 4.20), (2.0, 6.90), (5.0, 9.80), (10.0, 14.50)]  # (max kg, base price EUR)
ZONE_FACTOR = {"domestic": 1.0, "eu": 1.6, "world": 2.4}


def band_price(weight_kg):
    """The base price of the lightest band that takes the parcel (a band takes
    parcels up to and including its limit)."""
    for limit, price in BANDS:
        if weight_kg <= limit:
            return price
    raise ValueError(f"{weight_kg} kg is over the {BANDS[-1][0]} kg limit")


def quote(weight_kg, zone):
    """Price in EUR for one parcel, rounded to cents."""
    return round(band_price(weight_kg) * ZONE_FACTOR[zone], 2)
''',
    "repo/parcel/units.py": '''\
"""Weights as people write them."""


def grams_to_kg(grams):
    """Grams to kilograms."""
    return grams / 1000


def parse_weight(text):
    """'1.5 kg' or '750 g' to kilograms."""
    value, unit = text.split()
    value = float(value)
    if unit == "g":
        return grams_to_kg(value)
    if unit == "kg":
        return value
    raise ValueError(f"unknown unit {unit!r}")
''',
    "repo/parcel/orders.py": '''\
"""Orders: several parcels to one zone."""

from .rates import quote
from .units import parse_weight


def order_total(parcels, zone):
    """Sum of the quotes of every parcel; parcels are weight strings."""
    total = 0.0
    for text in parcels:
        total += quote(parse_weight(text), zone)
    return round(total, 2)


def heaviest(parcels):
    """The index of the heaviest parcel (the first one on a tie)."""
    best = 0
    for i in range(1, len(parcels)):
        if parse_weight(parcels[i]) > parse_weight(parcels[best]):
            best = i
    return best


def free_shipping(total, threshold=50.0):
    """Orders of at least the threshold ship free."""
    return total >= threshold
''',
    "repo/parcel/labels.py": '''\
"""Address labels."""


def label(name, street, city, postcode, country):
    """The label's lines; empty fields are left out."""
    lines = [name, street, f"{postcode} {city}", country.upper()]
    return "\\n".join(line.strip() for line in lines if line)
''',
    "repo/README.md": "# parcel\n\nShipping quotes for the web shop. Weights are in kilograms "
    "unless a unit says otherwise; prices in EUR.\n",
}


@dataclass(frozen=True)
class Hunk:
    """One edit of the change: in ``file``, the line ``old`` (exact, unique) becomes
    ``new`` (lines); ``flagged`` is the new line carrying the defect, ``kind`` its kind
    (None: a harmless change). ``site`` names what it edits: one hunk per site."""

    name: str
    file: str
    old: str
    new: tuple[str, ...]
    kind: str | None = None
    flagged: str = ""
    site: str = ""
    hard_only: bool = False


HUNKS = (
    Hunk("band_boundary", "repo/parcel/rates.py", "        if weight_kg <= limit:",
         ("        if weight_kg < limit:",), "off_by_one", "        if weight_kg < limit:",
         "band"),
    Hunk("threshold", "repo/parcel/orders.py", "    return total >= threshold",
         ("    return total > threshold",), "off_by_one", "    return total > threshold",
         "threshold"),
    Hunk("heaviest_range", "repo/parcel/orders.py", "    for i in range(1, len(parcels)):",
         ("    for i in range(1, len(parcels) - 1):",), "off_by_one",
         "    for i in range(1, len(parcels) - 1):", "heaviest"),
    Hunk("grams", "repo/parcel/units.py", "    return grams / 1000",
         ("    return grams / 100",), "unit_error", "    return grams / 100", "grams"),
    Hunk("compare_previous", "repo/parcel/orders.py",
         "        if parse_weight(parcels[i]) > parse_weight(parcels[best]):",
         ("        if parse_weight(parcels[i]) > parse_weight(parcels[i - 1]):",),
         "wrong_variable", "        if parse_weight(parcels[i]) > parse_weight(parcels[i - 1]):",
         "heaviest"),
    Hunk("empty_lines", "repo/parcel/labels.py",
         '    return "\\n".join(line.strip() for line in lines if line)',
         ('    return "\\n".join(line.strip() for line in lines)',), "missing_check",
         '    return "\\n".join(line.strip() for line in lines)', "label"),
    Hunk("chargeable", "repo/parcel/rates.py",
         "    raise ValueError(f\"{weight_kg} kg is over the {BANDS[-1][0]} kg limit\")",
         ("    raise ValueError(f\"{weight_kg} kg is over the {BANDS[-1][0]} kg limit\")", "",
          "", "def chargeable_kg(weight_kg, length_cm, width_cm, height_cm):",
          '    """The weight charged: the actual or the volumetric weight (L×W×H / 5000),',
          '    whichever is greater."""',
          "    return min(weight_kg, length_cm * width_cm * height_cm / 5000)"),
         "wrong_operator", "    return min(weight_kg, length_cm * width_cm * height_cm / 5000)",
         "chargeable"),
    Hunk("swapped_params", "repo/parcel/rates.py", "def quote(weight_kg, zone):",
         ("def quote(zone, weight_kg):",), "api_mismatch", "def quote(zone, weight_kg):",
         "quote", hard_only=True),
    # harmless changes that look like defects
    Hunk("heaviest_max", "repo/parcel/orders.py", "    best = 0",
         ("    best = max(range(len(parcels)), key=lambda i: parse_weight(parcels[i]))",
          "    return best", "", "", "def _heaviest_loop(parcels):", '    """The old loop."""',
          "    best = 0"), site="heaviest"),
    Hunk("zone_factor", "repo/parcel/rates.py",
         "    return round(band_price(weight_kg) * ZONE_FACTOR[zone], 2)",
         ("    factor = ZONE_FACTOR[zone]", "    return round(band_price(weight_kg) * factor, 2)"),
         site="quote_body"),
    Hunk("unit_message", "repo/parcel/units.py", '    raise ValueError(f"unknown unit {unit!r}")',
         ('    raise ValueError(f"unknown unit {unit!r}; use g or kg")',), site="unit_message"),
    Hunk("label_join", "repo/parcel/labels.py",
         '    lines = [name, street, f"{postcode} {city}", country.upper()]',
         ('    lines = [name, street, " ".join([postcode, city]), country.upper()]',),
         site="label_lines"),
)
# always in the patch: a new helper without a docstring (a finding once the turn asks)
HELPER = Hunk("cents_helper", "repo/parcel/orders.py", "    return round(total, 2)",
              ("    return round(total, 2)", "", "", "def cents(amount):",
               "    return round(amount * 100)"), site="helper")
SIZES = {"easy": (2, 1), "medium": (3, 2), "hard": (4, 3)}  # defects, harmless changes


def patched(hunks: Sequence[Hunk]) -> dict[str, str]:
    files = {p: c for p, c in REPO.items() if p.endswith(".py")}
    for hunk in hunks:
        lines = files[hunk.file].split("\n")
        assert lines.count(hunk.old) == 1, f"{hunk.name}: {hunk.old!r} is not unique"
        i = lines.index(hunk.old)
        files[hunk.file] = "\n".join([*lines[:i], *hunk.new, *lines[i + 1 :]])
    return files


def unified_diff(hunks: Sequence[Hunk]) -> bytes:
    after = patched(hunks)
    out: list[str] = []
    for path in sorted(after):
        before = REPO[path]
        if before == after[path]:
            continue
        rel = path.removeprefix("repo/")
        out += difflib.unified_diff(
            before.splitlines(keepends=True), after[path].splitlines(keepends=True),
            f"a/{rel}", f"b/{rel}",
        )
    return "".join(out).encode()


# ---- the review, as the verifier derives it from the final patch ---------------------------


@dataclass(frozen=True)
class Finding:
    file: str  # as the patch names it, e.g. parcel/rates.py
    line: int  # in the patched file
    kind: str


_HEADER = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def diff_lines(patch: bytes) -> list[tuple[str, int, str, str]]:
    """Every added and context line of a unified diff: (file, line in the new file, "+" or
    " ", text)."""
    out: list[tuple[str, int, str, str]] = []
    file, line = "", 0
    for raw in patch.decode().splitlines():
        if raw.startswith("+++ "):
            file = raw[4:].strip().removeprefix("b/")
        elif (m := _HEADER.match(raw)) is not None:
            line = int(m[1])
        elif raw[:1] in ("+", " ") and not raw.startswith("+++"):
            out.append((file, line, raw[:1], raw[1:]))
            line += 1
    return out


def added_lines(patch: bytes) -> list[tuple[str, int, str]]:
    """Every added line of a unified diff: (file, line in the new file, text)."""
    return [(f, n, t) for f, n, mark, t in diff_lines(patch) if mark == "+"]


def expected_findings(
    patch: bytes, docstrings: bool, originals: Mapping[str, bytes] | None = None
) -> list[Finding]:
    """The defects of the patch: each planted defect's added line, and (``docstrings``)
    the ``def`` line of each function the patch adds (its name not in the original file,
    ``originals``: repository path → content) whose next line is not a docstring."""
    originals = originals if originals is not None else {p: c.encode() for p, c in REPO.items()}
    lines = diff_lines(patch)
    found = []
    defects = {(h.file.removeprefix("repo/"), h.flagged): h.kind for h in HUNKS if h.kind}
    for index, (file, line, mark, text) in enumerate(lines):
        if mark != "+":
            continue
        kind = defects.get((file, text))
        if kind is not None:
            found.append(Finding(file, line, kind))
        new_def = re.match(r"def (\w+)\(", text)
        if docstrings and new_def is not None:
            original = originals.get(f"repo/{file}", b"").decode()
            following = lines[index + 1][3].strip() if index + 1 < len(lines) else ""
            if f"def {new_def[1]}(" not in original and not following.startswith('"""'):
                found.append(Finding(file, line, DOCSTRING_KIND))
    return sorted(found, key=lambda f: (f.file, f.line))


def changed_files(patch: bytes) -> list[str]:
    return sorted({f for f, _l, _t in added_lines(patch)})


# ---- the family -----------------------------------------------------------------------------

SOLVE = python_solution(
    "the review of each version of the patch, written by the task's author.",
    r"""import hashlib, json, os

turn = int(os.environ.get("COWORK_TURN", "0"))
docstrings = turn >= int(os.environ["DOCSTRING_FROM_TURN"])
reviews = json.loads('''__REVIEWS__''')
digest = hashlib.sha256(open("change.patch", "rb").read()).hexdigest()
review = reviews[digest]
findings = [dict(f, message=f"{f['kind'].replace('_', ' ')} on this line")
            for f in review["findings"] if docstrings or f["kind"] != "missing_docstring"]
json.dump({"verdict": "request_changes" if findings else "approve",
           "files_changed": review["files_changed"], "findings": findings},
          open("review.json", "w"), indent=2)
""",
    "DOCSTRING_FROM_TURN",
)


class CodeReview(TaskFamily):
    name = "code_review"
    scenarios = ("software/maintenance/code_review",)
    capabilities = ("debugging", "verification", "requirement_tracking", "dependency_tracking")
    # with 3 turns both later turns come: the docstring rule and the second version
    later_capabilities = ("requirement_tracking", "dependency_tracking")
    deliverables = ("json",)
    modalities = ("code", "text")
    traps = (
        Trap(
            "swapped_parameters",
            "the change swaps a function's parameters; its existing callers pass the old order",
            (
                r"\bswap\w*\b[^.]*\b(?:parameters?|arguments?|params?)\b",
                r"\b(?:parameters?|arguments?|params?)\b[^.]*\bswapped\b",
                r"\bold (?:argument|parameter) order\b",
            ),
        ),
        Trap(
            "max_keeps_first_tie",
            "max with a key keeps the first of ties, as the old loop did: not a defect",
            (r"\bfirst of (?:the )?ties\b", r"\bmax\b[^.]*\b(?:harmless|fine|not a defect)\b"),
        ),
    )

    def draft(self, params: FamilyParams) -> FamilyDraft:
        rng = params.rng("review")
        first, spare = _choose(params, rng)
        turn_kinds, docstring_from = plan_turns(rng, params, "input_replaced")
        turns: list[UserTurn] = []
        versions = [first]
        for index, kind in enumerate(turn_kinds, start=1):
            if kind == "input_replaced":
                versions.append(_second_version(versions[-1], spare, params.rng(f"v{index}")))
                turns.append(
                    input_turn(
                        index,
                        when_delivered(REVIEW, index),
                        "The author pushed a second version of the change after your review. "
                        f"I replaced {PATCH} with it; please review it afresh (line numbers "
                        "moved).",
                        {PATCH: unified_diff(versions[-1])},
                        reason="second version of the change",
                        invalidates=[REVIEW],
                    )
                )
            else:
                turns.append(
                    requirement_turn(
                        index,
                        "One more team rule for reviews: every function the change adds needs "
                        f"a docstring. Flag each added `def` without one as kind "
                        f"`{DOCSTRING_KIND}`, on the line of its `def`, and update the verdict.",
                        [REVIEW],
                    )
                )
        reviews = {}
        for version in versions:
            patch = unified_diff(version)
            reviews[sha256(patch)] = {
                "files_changed": changed_files(patch),
                "findings": [f.__dict__ for f in expected_findings(patch, True)],
            }
        workspace = {p: c.encode() for p, c in REPO.items()}
        workspace[PATCH] = unified_diff(first)
        return FamilyDraft(
            slug=f"code-review-{params.difficulty}-{params.seed}",
            title="Review the volumetric-weight change to the parcel calculator",
            instruction=_instruction(),
            workspace=workspace,
            solve_sh=fill_template(
                SOLVE, reviews=json.dumps(reviews), docstring_from_turn=docstring_from
            ),
            user=user_state(
                "Tech lead of the web shop's small platform team.",
                "engineer",
                "Reviews must be precise: a wrong flag costs the author as much as a missed "
                "bug.",
                "does not know which parts of the change the author tested",
                (
                    "agent asks whether weights are in grams or kilograms",
                    "kilograms everywhere unless the string says g",
                ),
            ),
            inputs=input_artifacts({**{p: _format(p) for p in REPO}, PATCH: "other"}),
            outputs=output_artifacts({REVIEW: "json"}, [PATCH]),
            turns=turns,
        )

    def verifier(self, built: BuilderOutput, params: FamilyParams) -> VerifierOutput:
        inputs = built.final_inputs()
        patch = inputs[PATCH]
        findings = expected_findings(patch, requirement_added(built), inputs)
        expected = {"findings": [f.__dict__ for f in findings]}
        components = [
            Component(id="defects_found", weight=5, check=CustomScript(script="check_found.py"),
                      requirement="each defect flagged at its file, line and kind"),
            Component(id="no_false_flags", weight=3,
                      check=CustomScript(script="check_precise.py"),
                      requirement="no finding where there is no defect"),
            json_value("verdict", REVIEW, "/verdict",
                       "request_changes" if findings else "approve", "review.json verdict"),
            json_value("files_changed", REVIEW, "/files_changed", changed_files(patch),
                       "review.json files_changed"),
        ]
        spec = VerifierSpec(
            components=components,
            red_lines=[
                inputs_unmodified(
                    "repository_unmodified",
                    "the repository and the patch under review must not change",
                    inputs,
                )
            ],
            rubric=rubric(
                "actionable_review",
                "Each finding's message says what goes wrong and for which input, so the "
                "author can fix it without asking.",
                [REVIEW],
            ),
        )
        private = {
            EXPECTED: expectations(expected),
            "check_found.py": CHECK.replace("__MODE__", "found").encode(),
            "check_precise.py": CHECK.replace("__MODE__", "precise").encode(),
        }
        # no private copies of the inputs: the red line holds their hashes, the expectations
        # are computed here, and the audit reads a copy of a code file as a leak
        return verifier_output(spec, {}, private)

    def readings(self, inputs: Mapping[str, bytes], turns: Sequence[TurnPatch]) -> list[Reading]:
        return []  # the line is the new file's, and the kinds are defined in the instruction


def _format(path: str) -> Format:
    return "py" if path.endswith(".py") else "md"


def _choose(params: FamilyParams, rng: random.Random) -> tuple[list[Hunk], list[Hunk]]:
    defects, harmless = SIZES[params.difficulty]
    hard = params.difficulty == "hard"
    bugs = [h for h in HUNKS if h.kind and (hard or not h.hard_only)]
    chosen: list[Hunk] = [HELPER]
    if hard:
        chosen.append(next(h for h in bugs if h.hard_only))
    pool = [h for h in bugs if not h.hard_only]
    rng.shuffle(pool)
    for hunk in pool:
        if sum(1 for h in chosen if h.kind) >= defects:
            break
        if hunk.site not in {h.site for h in chosen}:
            chosen.append(hunk)
    decoys = [h for h in HUNKS if not h.kind]
    rng.shuffle(decoys)
    for hunk in decoys:
        if sum(1 for h in chosen if not h.kind) >= harmless + 1:  # the helper is one
            break
        if hunk.site not in {h.site for h in chosen} and not (
            hunk.site == "quote_body" and any(h.site == "quote" for h in chosen)
        ):
            chosen.append(hunk)
    spare = [h for h in pool if h not in chosen and h.site not in {c.site for c in chosen}]
    return chosen, spare


def _second_version(hunks: list[Hunk], spare: list[Hunk], rng: random.Random) -> list[Hunk]:
    """One defect fixed (its hunk dropped) and a new one from the spares."""
    fixable = [h for h in hunks if h.kind and not h.hard_only]
    dropped = rng.choice(fixable)
    sites = {h.site for h in hunks if h is not dropped}
    new = next((h for h in spare if h.site not in sites), None)
    out = [h for h in hunks if h is not dropped]
    return [*out, new] if new is not None else out


def _instruction() -> str:
    kinds = {
        "off_by_one": "a boundary or range that is one off (< for <=, a range one short)",
        "wrong_operator": "the wrong operator or function (min for max, + for −)",
        "unit_error": "a quantity in the wrong unit or scale",
        "wrong_variable": "a correct expression applied to the wrong variable",
        "missing_check": "a check or filter the old code had, dropped",
        "api_mismatch": "a function whose parameters or result the change alters while "
        "existing calls to it (on lines the change leaves as they were, in any file) still "
        "pass or expect the old ones; flag the changed `def` line",
    }
    listing = "\n".join(f"  - `{k}`: {v}" for k, v in kinds.items())
    return f"""\
Please review the change in `{PATCH}` (a unified diff against the repository in `repo/`;
paths in the diff are relative to `repo/`). The docstrings and `repo/README.md` say what
the code is meant to do.

Write `{REVIEW}`:
- `findings`: one object per defect the change introduces, with `file` (the path as the
  diff names it, e.g. `parcel/rates.py`), `line` (the line number, in the file *after* the
  change, of the added line that carries the defect), `kind` and a `message`. Kinds:
{listing}
  Flag defects only: a change that keeps the behaviour the docstrings describe is not a
  finding, however it is written.
- `verdict`: `request_changes` if there is any finding, else `approve`.
- `files_changed`: the files the diff changes, sorted.

You may copy the repository elsewhere to try the change, but do not modify `repo/` or
`{PATCH}`.
"""


CHECK = (
    CHECK_PRELUDE
    + r'''
MODE = "__MODE__"
expected = json.loads((Path(__file__).parent / "expected_review.json").read_text())["findings"]
path = ws / "review.json"
try:
    review = json.loads(path.read_text())
    findings = [f for f in review["findings"] if isinstance(f, dict)]
except (OSError, ValueError, KeyError, TypeError) as exc:
    report(0.0, f"review.json does not read: {exc!r}")


def where(f):
    try:
        return (str(f.get("file", "")).removeprefix("repo/").removeprefix("b/"), int(f["line"]))
    except (KeyError, TypeError, ValueError):
        return ("", -1)


flagged = {}
for f in findings:
    flagged.setdefault(where(f), []).append(str(f.get("kind", "")))
wanted = {(e["file"], e["line"]): e["kind"] for e in expected}
if MODE == "found":
    if not wanted:
        report(1.0 if not findings else 0.0, "no defects to find")
    score, notes = 0.0, []
    for key, kind in wanted.items():
        kinds = flagged.get(key, [])
        if kind in kinds:
            score += 1
        elif kinds:
            score += 0.5
            notes.append(f"{key}: kind {kinds}, want {kind}")
        else:
            notes.append(f"{key}: not flagged ({kind})")
    report(score / len(wanted), "; ".join(notes) or "every defect flagged")
if MODE == "precise":
    if not findings:
        report(1.0 if not wanted else 0.0, "no findings")
    false = [k for k in flagged if k not in wanted]
    hits = sum(len(v) for k, v in flagged.items() if k in wanted)
    report(hits / len(findings), f"findings with no defect: {false[:5]}" if false else "precise")
report(0.0, f"unknown mode {MODE}")
'''
)


__all__ = ["CodeReview", "added_lines", "expected_findings", "unified_diff"]
