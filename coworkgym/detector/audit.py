"""The rule audit: static checks on a package, each a small function pkg → defects.

Runs on plain Harbor tasks as Harbor reads them: Cowork-only rules skip packages without
``[metadata.cowork]``; files Harbor does not package are not ours to refuse; Harbor's
multi-step layout (``steps/<name>/``) is the task's structure; a choice Harbor allows but
lints (shared verifier mode) is a warning, while our own packages must avoid it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import PurePosixPath
from typing import Any

from ..package.harbor_ignore import unhonoured
from ..package.package import (
    ARTIFACT_GRAPH,
    COWORK_DIRS,
    HARBOR_DIRS,
    HARBOR_TOP_FILES,
    INSTRUCTION,
    INTERFACES,
    SOLVE_SH,
    TEST_SH,
    USER_STATE,
    VERIFIER_SPEC,
    EnvironmentPackage,
)
from ..verifier.spec import Component
from .ambiguity import answers_determined
from .defects import Defect, DefectCode
from .labels import labels_match_task
from .user_hints import answers_stay_on_subject, traps_kept

MAX_FILE_BYTES = 5 * 1024 * 1024
MAX_PACKAGE_BYTES = 50 * 1024 * 1024
EXISTENCE_ONLY = {"file_exists", "file_absent"}
TEXT_SUFFIXES = {".csv", ".md", ".txt", ".json", ".py", ".tsv", ".yaml", ".yml", ".html"}

Rule = Callable[[EnvironmentPackage], Iterable[Defect]]


def structure(pkg: EnvironmentPackage) -> Iterable[Defect]:
    if not pkg.is_cowork:
        yield from harbor_structure(pkg)
        return
    required = [INSTRUCTION, TEST_SH, SOLVE_SH, VERIFIER_SPEC, USER_STATE, INTERFACES]
    required.append(ARTIFACT_GRAPH)
    if pkg.config.environment.docker_image is None:
        required.append("environment/Dockerfile")
    for rel in required:
        if not pkg.files.get(rel, b"").strip():
            yield Defect.of(DefectCode.PACKAGE_STRUCTURE, f"{rel} is missing or empty", file=rel)
    cowork = pkg.config.cowork
    if cowork is not None and len(pkg.patches) != cowork.turns - 1:
        yield Defect.of(
            DefectCode.PACKAGE_STRUCTURE,
            f"task.toml declares {cowork.turns} turns but .patch/ holds {len(pkg.patches)} turns",
        )
    for patch in pkg.patches:
        sources = pkg.patch_files(patch.turn)
        for update in patch.updates:
            if update.source is not None and update.source not in sources:
                yield Defect.of(
                    DefectCode.PACKAGE_STRUCTURE,
                    f"turn {patch.turn} writes {update.path} from missing files/{update.source}",
                )


NO_ORACLE = "oracle"  # evidence ``absent``: the missing file is the oracle, the task still runs


def harbor_structure(pkg: EnvironmentPackage) -> Iterable[Defect]:
    """What Harbor needs to run a task (single- or multi-step). The oracle is optional to
    Harbor, but without one nothing shows the task can be solved: that is an error (the
    task's authors must ship one), and the no-op is still checked (``NO_ORACLE``)."""
    required = [] if pkg.config.environment.docker_image else ["environment/Dockerfile"]
    solutions = [SOLVE_SH]
    if pkg.is_multi_step:
        for name in pkg.step_names:
            required.append(f"steps/{name}/{INSTRUCTION}")
            if f"steps/{name}/{TEST_SH}" not in pkg.files:
                required.append(TEST_SH)  # the step falls back to the shared script
        solutions = [f"steps/{name}/{SOLVE_SH}" for name in pkg.step_names]
    else:
        required += [INSTRUCTION, TEST_SH]
    for rel in dict.fromkeys(required):
        if not pkg.files.get(rel, b"").strip():
            yield Defect.of(DefectCode.PACKAGE_STRUCTURE, f"{rel} is missing or empty", file=rel)
    for rel in unhonoured(pkg.files):
        yield Defect.of(
            DefectCode.PACKAGE_STRUCTURE,
            f"{rel} cannot be applied here (install the harbor extra for pathspec); "
            "the files it excludes are uploaded",
            severity="warning",
            file=rel,
        )
    missing = [rel for rel in solutions if rel not in pkg.files]
    if missing:
        yield Defect.of(
            DefectCode.PACKAGE_STRUCTURE,
            f"no oracle ({', '.join(missing)}): nothing shows the task can be solved (the "
            "reference completion cannot be checked, only that doing nothing fails)",
            missing=missing,
            absent=NO_ORACLE,
        )


def whitelist_and_sizes(pkg: EnvironmentPackage) -> Iterable[Defect]:
    allowed_dirs = HARBOR_DIRS + (COWORK_DIRS if pkg.is_cowork else ())
    total = 0
    for rel, content in pkg.files.items():
        total += len(content)
        outside = rel not in HARBOR_TOP_FILES and not rel.startswith(allowed_dirs)
        if outside and not pkg.is_cowork:
            continue  # Harbor neither packages nor uploads it; it cannot affect a run
        if outside:
            yield Defect.of(
                DefectCode.FILE_NOT_ALLOWED, f"{rel} is not part of a package", file=rel
            )
        if len(content) > MAX_FILE_BYTES:
            yield Defect.of(DefectCode.FILE_TOO_LARGE, f"{rel} has {len(content)} bytes", file=rel)
    if total > MAX_PACKAGE_BYTES:
        yield Defect.of(DefectCode.FILE_TOO_LARGE, f"package has {total} bytes in all")


def path_escapes(pkg: EnvironmentPackage) -> Iterable[Defect]:
    for rel, target in pkg.symlinks.items():
        resolved = PurePosixPath(rel).parent / target
        escapes = target.startswith("/") or _escapes(resolved)
        if escapes or rel.startswith("environment/"):
            yield Defect.of(
                DefectCode.PATH_ESCAPE, f"symlink {rel} -> {target}", file=rel, target=target
            )
    for rel in pkg.files:
        if ".." in PurePosixPath(rel).parts:
            yield Defect.of(DefectCode.PATH_ESCAPE, f"path {rel} contains '..'", file=rel)


def _in_step_private_dir(rel: str) -> bool:
    parts = PurePosixPath(rel).parts
    return len(parts) > 3 and parts[0] == "steps" and parts[2] in ("tests", "solution")


def _escapes(path: PurePosixPath) -> bool:
    depth = 0
    for part in path.parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            return True
    return False


def dockerfile_leaks(pkg: EnvironmentPackage) -> Iterable[Defect]:
    dockerfile = pkg.files.get("environment/Dockerfile", b"").decode("utf-8", "replace")
    for line in dockerfile.splitlines():
        words = line.strip().split()
        if words and words[0].upper() in ("COPY", "ADD"):
            for src in words[1:-1]:
                if not pkg.is_cowork and _in_build_context(pkg, src):
                    continue  # the agent's own files (visible tests, say); content judged below
                if re.match(r"^(\.\./|/)?(tests|solution|\.user|\.patch|steps)\b", src):
                    yield Defect.of(
                        DefectCode.LEAK_VERIFIER_CONTENT,
                        f"environment/Dockerfile copies {src} into the agent image",
                        line=line.strip(),
                    )


# A tests/ or solution/ file the agent must not see: code that grades or solves, or a file
# named as an answer. Anything else identical to an environment/ file is the verifier's own
# pristine copy of an input the agent already has (to detect tampering), not a leak.
PRIVATE_CODE_SUFFIXES = {".sh", ".py", ".js", ".ts", ".rb", ".pl", ".go", ".rs", ".java"}
ANSWER_NAME = re.compile(r"expect|answer|golden|solution|solve|reference|truth|oracle", re.I)


def is_private(rel: str) -> bool:
    path = PurePosixPath(rel)
    return path.suffix.lower() in PRIVATE_CODE_SUFFIXES or bool(ANSWER_NAME.search(path.name))


def _in_build_context(pkg: EnvironmentPackage, src: str) -> bool:
    base = src.strip("/").removeprefix("./")
    return any(rel == base or rel.startswith(base + "/") for rel in pkg.under("environment"))


def private_files_in_workspace(pkg: EnvironmentPackage) -> Iterable[Defect]:
    """A byte-identical copy of verifier or solution content in the agent-visible context."""
    private = {
        content: rel
        for rel, content in pkg.files.items()
        if (rel.startswith(("tests/", "solution/")) or _in_step_private_dir(rel))
        and len(content) >= 32
        and is_private(rel)
        and not rel.endswith("Dockerfile")
    }
    for rel, content in pkg.under("environment").items():
        if content in private:
            yield Defect.of(
                DefectCode.LEAK_VERIFIER_CONTENT,
                f"environment/{rel} is a copy of {private[content]}",
                file=f"environment/{rel}",
            )


def agent_visible_text(pkg: EnvironmentPackage) -> dict[str, str]:
    """Instruction plus the text of every s0 file the agent can open."""
    texts = {INSTRUCTION: pkg.instruction}
    workspace = pkg.workspace() if pkg.is_cowork else pkg.under("environment")
    for rel, content in workspace.items():
        if PurePosixPath(rel).suffix.lower() in TEXT_SUFFIXES:
            texts[f"workspace/{rel}"] = content.decode("utf-8", errors="replace")
    return texts


def _number_tokens(value: float) -> list[str]:
    tokens = {f"{value:.2f}", f"{value:,.2f}"}
    if float(value).is_integer():
        tokens |= {f"{int(value)}", f"{int(value):,}"}
    return [t for t in tokens if len(t.replace(",", "").replace(".", "").lstrip("-")) >= 5]


def expected_values_leak(pkg: EnvironmentPackage) -> Iterable[Defect]:
    """Distinctive expected numbers (≥ 5 digits) of the verifier visible to the agent."""
    if pkg.verifier is None:
        return
    texts = agent_visible_text(pkg)
    for component in pkg.verifier.components:
        expected = getattr(component.check, "expected", None)
        if isinstance(expected, bool) or not isinstance(expected, int | float):
            continue
        for token in _number_tokens(float(expected)):
            pattern = re.compile(rf"(?<![\d.,]){re.escape(token)}(?![\d])")
            for where, text in texts.items():
                if where.startswith("workspace/") and where[10:] in _declared_inputs(pkg):
                    continue  # values the agent must compute may not hide in the inputs' own rows
                if pattern.search(text):
                    yield Defect.of(
                        DefectCode.LEAK_EXPECTED_VALUE,
                        f"expected value {token} of component {component.id} appears in {where}",
                        component=component.id,
                        file=where,
                    )
                    return


def _declared_inputs(pkg: EnvironmentPackage) -> set[str]:
    return {a.path for a in pkg.artifacts.inputs} if pkg.artifacts else set()


def user_state_leak(pkg: EnvironmentPackage) -> Iterable[Defect]:
    if pkg.user is None:
        return
    secrets = [*pkg.user.latent_goals, *(s.reveals for s in pkg.user.signal_plan)]
    secrets += [p.message for p in pkg.patches]
    texts = agent_visible_text(pkg)
    for secret in secrets:
        needle = " ".join(secret.split()).casefold()
        if len(needle) < 20:
            continue
        for where, text in texts.items():
            if needle in " ".join(text.split()).casefold():
                yield Defect.of(
                    DefectCode.LEAK_USER_STATE,
                    f"private user state visible in {where}: {secret[:60]!r}",
                    file=where,
                )


def verifier_components(pkg: EnvironmentPackage) -> Iterable[Defect]:
    spec = pkg.verifier
    if spec is None:
        return
    meaningful = [c for c in spec.components if not _existence_only(c)]
    if len(meaningful) < 3:
        yield Defect.of(
            DefectCode.VERIFIER_TOO_FEW_COMPONENTS,
            f"{len(meaningful)} meaningful component(s); at least 3 are needed",
            meaningful=[c.id for c in meaningful],
        )
    if not spec.red_lines:
        yield Defect.of(DefectCode.VERIFIER_NO_RED_LINE, "no red line guards the inputs")
    for component in spec.components:
        reason = _permissive(component.check.model_dump(by_alias=True))
        if reason:
            yield Defect.of(
                DefectCode.VERIFIER_PERMISSIVE_CHECK,
                f"component {component.id}: {reason}",
                component=component.id,
            )


def _existence_only(component: Component) -> bool:
    check = component.check
    return check.type in EXISTENCE_ONLY and getattr(check, "min_bytes", 1) <= 1


def _permissive(check: dict[str, Any]) -> str | None:
    expected = check.get("expected")
    if isinstance(expected, int | float) and not isinstance(expected, bool):
        allowed = max(check.get("tolerance", 0.0), check.get("rel_tolerance", 0.0) * abs(expected))
        if expected != 0 and allowed >= 0.1 * abs(expected):
            return f"tolerance {allowed} is ≥ 10% of the expected {expected}"
    if check.get("type") == "text_regex" and check.get("must_match", True):
        if re.fullmatch(r"\^?(\.\*|\.\+|\.|\\S|\\w|)\$?", check.get("pattern", "")):
            return f"pattern {check.get('pattern')!r} matches any text"
    if check.get("type") == "row_count" and not check.get("equals") and not check.get("min"):
        if check.get("max") is None or check.get("max", 0) > 10_000:
            return "row_count accepts an empty table"
    if check.get("type") == "aggregate" and check.get("tolerance", 0) >= 1.0:
        return f"aggregate tolerance {check.get('tolerance')} is too loose"
    return None


def shared_verifier(pkg: EnvironmentPackage) -> Iterable[Defect]:
    """Our packages must use a separate verifier. Harbor runs shared mode by default (and
    lints it); there the execution review probes what matters, a grader the agent can
    rewrite (VERIFIER_AGENT_WRITABLE), so shared mode alone is a warning."""
    if pkg.config.verifier.mode == "shared":
        yield Defect.of(
            DefectCode.VERIFIER_SHARED_MODE,
            "verifier runs in the agent's sandbox (shared mode): what the agent leaves there "
            'can sway the reward; set [verifier] environment_mode = "separate" and declare '
            "artifacts",
            severity="error" if pkg.is_cowork else "warning",
        )


def patches(pkg: EnvironmentPackage) -> Iterable[Defect]:
    if pkg.artifacts is None:
        return
    inputs = {a.path for a in pkg.artifacts.inputs}
    s0 = pkg.workspace()
    instruction = " ".join(pkg.instruction.split()).casefold()
    for patch in pkg.patches:
        sources = pkg.patch_files(patch.turn)
        news = (
            patch.kind == "requirement_changed"
            and " ".join(patch.message.split()).casefold() not in instruction
        )
        for update in patch.updates:
            if update.path not in inputs:
                yield Defect.of(
                    DefectCode.PATCH_UNAUTHORIZED,
                    f"turn {patch.turn} edits {update.path}, which is not a declared input",
                    turn=patch.turn,
                    path=update.path,
                )
            new = sources.get(update.source or "", None)
            if update.op == "delete" or (new is not None and new != s0.get(update.path)):
                news = True
        if not news:
            yield Defect.of(
                DefectCode.PATCH_NO_NEW_INFORMATION,
                f"turn {patch.turn} changes no input and states no new requirement",
                turn=patch.turn,
            )
        missing = pkg.artifacts.unlisted_invalidations(patch)
        if missing:
            yield Defect.of(
                DefectCode.PATCH_INVALIDATION_MISSING,
                f"turn {patch.turn} does not list dependent artifacts {missing} as invalidated",
                turn=patch.turn,
                missing=missing,
            )


RULES: list[Rule] = [
    structure,
    whitelist_and_sizes,
    path_escapes,
    dockerfile_leaks,
    private_files_in_workspace,
    expected_values_leak,
    user_state_leak,
    verifier_components,
    shared_verifier,
    patches,
    labels_match_task,
    answers_determined,
    traps_kept,
    answers_stay_on_subject,
]


def audit(pkg: EnvironmentPackage) -> list[Defect]:
    return [defect for rule in RULES for defect in rule(pkg)]
