"""Cleaning CRM lead exports to a written style guide: several exports with different
schemas merged into one CSV (names, emails, E.164 phones, ISO country codes and dates,
duplicates merged) plus a JSON cleaning report.

Grounded in lead lists this family writes itself (CC0): people from six European
countries met through a web form and a trade show (and, in the hard variant, a partner's
referrals), each export with its own columns, date format and habits — shouting or
lower-case names, particles ("van der", "de"), apostrophes and hyphens, phones in national,
00- and +-prefixed forms (Spain has no trunk zero to drop), country names in several
languages, European day-first dates. The same person appears in several exports under
differently written emails; the style guide says which record's fields win.

Later user turns either replace the trade-show export with a corrected one (new rows, a
newer record for a known person) or add a requirement: company names lose their legal
suffix.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, timedelta

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..package.cowork import TurnPatch
from ..verifier.spec import Component, CustomScript, RowCount, TableColumns, VerifierSpec
from .common import (
    CHECK_PRELUDE,
    FamilyDraft,
    FamilyParams,
    Reading,
    TaskFamily,
    expectations,
    fill_template,
    input_artifacts,
    input_turn,
    inputs_unmodified,
    json_value,
    output_artifacts,
    parse_csv,
    plan_turns,
    python_solution,
    requirement_added,
    requirement_turn,
    rubric,
    user_state,
    verifier_output,
    when_delivered,
    write_csv,
)

WEBFORM, TRADESHOW, PARTNER = "exports/webform.csv", "exports/tradeshow.csv", "exports/partner.csv"
GUIDE = "style_guide.md"
CLEAN, REPORT = "leads_clean.csv", "cleaning_report.json"
EXPECTED = "expected_leads.json"
COLUMNS = ["email", "first_name", "last_name", "phone", "company", "country_code",
           "first_contact"]
SCHEMAS = {
    WEBFORM: ["full_name", "email", "phone", "company", "country", "signed_up"],
    TRADESHOW: ["First Name", "Last Name", "E-mail", "Tel", "Organisation", "Country",
                "Date met"],
    PARTNER: ["Name", "Email", "Phone", "Company", "Country", "Referred"],
}
# country code → (calling code, trunk prefix dropped, names the exports use)
COUNTRIES = {
    "GB": ("44", True, ("United Kingdom", "UK", "Great Britain")),
    "DE": ("49", True, ("Germany", "Deutschland")),
    "NL": ("31", True, ("Netherlands", "Holland", "Nederland")),
    "FR": ("33", True, ("France",)),
    "IE": ("353", True, ("Ireland", "Éire")),
    "ES": ("34", False, ("Spain", "España")),
}
NATIONAL = {  # a national significant number's first digits and length, per country
    "GB": ("20", 10), "DE": ("30", 10), "NL": ("20", 9), "FR": ("1", 9), "IE": ("1", 8),
    "ES": ("91", 9),
}
FIRST = ("anna", "bram", "chloé", "dieter", "eoin", "fatima", "greta", "hugo", "iris", "jan",
         "katrin", "luis", "marie", "niamh", "oscar", "pilar", "quentin", "ruth", "sven", "tess")
LAST = ("van der berg", "de vries", "o'neill", "smith-jones", "garcía", "müller", "dubois",
        "murphy", "janssen", "schmidt", "le roux", "fernández", "walsh", "bakker", "brennan",
        "von arnim", "martin", "kelly", "visser", "moreau")
PARTICLES = {"van", "der", "de", "von", "le", "da"}
COMPANIES = ("Alder Analytics Ltd", "Brightwater GmbH", "Canal Logistics B.V.",
             "Dune Conseil S.A.", "Emerald Foods Ltd", "Fjord Systems GmbH", "Granada Tech S.A.",
             "Harbour Media plc", "Iberia Energía S.A.", "Juniper Labs B.V.")
SUFFIXES = ("Ltd", "GmbH", "B.V.", "S.A.", "plc")
SIZES = {"easy": (6, 3, 0), "medium": (8, 5, 0), "hard": (8, 6, 5)}  # webform, trade show, partner


@dataclass(frozen=True)
class Person:
    first: str  # canonical, as the style guide writes it
    last: str
    email: str
    country: str
    national: str  # national significant number
    company: str


@dataclass(frozen=True)
class Record:
    source: str
    person: Person
    email: str  # as exported (case, spaces; "" when missing)
    met: date


# ---- the style guide, as the verifier applies it --------------------------------------------


def name_case(text: str) -> str:
    words = " ".join(text.split()).lower().split(" ")
    out = []
    for word in words:
        if word in PARTICLES:
            out.append(word)
            continue
        out.append("-".join("'".join(p[:1].upper() + p[1:] for p in part.split("'"))
                            for part in word.split("-")))
    return " ".join(out)


def country_code(text: str) -> str:
    wanted = " ".join(text.split()).casefold()
    for code, (_cc, _trunk, names) in COUNTRIES.items():
        if wanted == code.casefold() or wanted in (n.casefold() for n in names):
            return code
    return ""


def e164(text: str, code: str) -> str:
    digits = re.sub(r"\D", "", text)
    calling, trunk, _names = COUNTRIES[code]
    if text.strip().startswith("+"):
        return "+" + digits
    if digits.startswith("00"):
        return "+" + digits[2:]
    if trunk and digits.startswith("0"):
        digits = digits[1:]
    return f"+{calling}{digits}"


def iso_date(text: str, source: str) -> str:
    text = text.strip()
    if source == TRADESHOW:  # day first: 03/04/2026 is 3 April
        day, month, year = text.split("/")
        return f"{year}-{int(month):02d}-{int(day):02d}"
    if source == PARTNER:  # "14 Jan 2026"
        day, month, year = text.split()
        months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                  "dec"]
        return f"{year}-{months.index(month[:3].lower()) + 1:02d}-{int(day):02d}"
    return text[:10]


def strip_suffix(company: str) -> str:
    for suffix in SUFFIXES:
        if company.casefold().endswith(" " + suffix.casefold()):
            return company[: -len(suffix) - 1].rstrip(" ,")
    return company


@dataclass(frozen=True)
class Cleaned:
    rows: list[dict[str, str]]  # sorted by email
    input_rows: int
    no_email: int
    invalid_email: int
    merged: int


def clean(exports: Mapping[str, bytes], *, strip: bool, day_first: bool = True) -> Cleaned:
    """The style guide applied to every export; ``day_first=False`` reads the trade show's
    dates month first (a reading the guide rules out)."""
    records: list[dict[str, str]] = []
    total = no_email = invalid = 0
    for source in (WEBFORM, TRADESHOW, PARTNER):
        if source not in exports:
            continue
        for row in parse_csv(exports[source]):
            total += 1
            record = _normalized(row, source, strip, day_first)
            if not record["email"]:
                no_email += 1
            elif not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", record["email"]):
                invalid += 1
            else:
                records.append(record)
    people: dict[str, list[dict[str, str]]] = {}
    for record in records:
        people.setdefault(record["email"], []).append(record)
    rows = []
    for email in sorted(people):
        group = sorted(people[email], key=lambda r: r["first_contact"], reverse=True)
        merged = {"email": email, "first_contact": group[-1]["first_contact"]}
        for column in COLUMNS[1:-1]:
            merged[column] = next((r[column] for r in group if r[column]), "")
        rows.append({c: merged[c] for c in COLUMNS})
    return Cleaned(rows, total, no_email, invalid, len(records) - len(rows))


def _normalized(
    row: Mapping[str, str], source: str, strip: bool, day_first: bool
) -> dict[str, str]:
    if source == WEBFORM:
        words = " ".join(row["full_name"].split()).split(" ")
        first, last = words[0], " ".join(words[1:])
        email, phone, company, country, met = (
            row["email"], row["phone"], row["company"], row["country"], row["signed_up"])
    elif source == TRADESHOW:
        first, last = row["First Name"], row["Last Name"]
        email, phone, company, country, met = (
            row["E-mail"], row["Tel"], row["Organisation"], row["Country"], row["Date met"])
    else:
        last, _sep, first = row["Name"].partition(",")
        email, phone, company, country, met = (
            row["Email"], row["Phone"], row["Company"], row["Country"], row["Referred"])
    code = country_code(country)
    company = " ".join(company.split())
    when = iso_date(met, source)
    if source == TRADESHOW and not day_first:
        year, month, day = when.split("-")
        when = f"{year}-{day}-{month}" if int(day) <= 12 else when
    return {
        "email": email.strip().lower(),
        "first_name": name_case(first),
        "last_name": name_case(last),
        "phone": e164(phone, code) if phone.strip() and code else "",
        "company": strip_suffix(company) if strip else company,
        "country_code": code,
        "first_contact": when,
    }


# ---- the family -----------------------------------------------------------------------------

SOLVE = python_solution(
    "merge the lead exports into one clean CSV by the style guide.",
    r"""import csv, json, os, re

turn = int(os.environ.get("COWORK_TURN", "0"))
strip = turn >= int(os.environ["STRIP_FROM_TURN"])
codes = {"united kingdom": "GB", "uk": "GB", "great britain": "GB", "germany": "DE",
         "deutschland": "DE", "netherlands": "NL", "holland": "NL", "nederland": "NL",
         "france": "FR", "ireland": "IE", "éire": "IE", "spain": "ES", "españa": "ES"}
calling = {"GB": "44", "DE": "49", "NL": "31", "FR": "33", "IE": "353", "ES": "34"}
particles = {"van", "der", "de", "von", "le", "da"}  # always lower case
months = "jan feb mar apr may jun jul aug sep oct nov dec".split()

def cap(word):
    return "-".join("'".join(p[:1].upper() + p[1:] for p in h.split("'")) for h in word.split("-"))

def name(text):
    words = text.lower().split()
    return " ".join(w if w in particles else cap(w) for w in words)

def phone(text, code):
    t = text.strip()
    d = re.sub(r"\D", "", t)
    if not d or not code:
        return ""
    if t.startswith("+"):
        return "+" + d
    if d.startswith("00"):
        return "+" + d[2:]
    if code != "ES" and d.startswith("0"):
        d = d[1:]
    return "+" + calling[code] + d

def company(text):
    text = " ".join(text.split())
    if strip:
        text = re.sub(r",?\s+(ltd|gmbh|b\.v\.|s\.a\.|plc)$", "", text, flags=re.I)
    return text

rows, total, no_email, invalid = [], 0, 0, 0
def add(first, last, email, tel, org, country, when):
    global total, no_email, invalid
    total += 1
    email = email.strip().lower()
    if not email:
        no_email += 1
        return
    if not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", email):
        invalid += 1
        return
    code = codes.get(" ".join(country.split()).lower(), country.strip().upper()
                     if country.strip().upper() in calling else "")
    rows.append({"email": email, "first_name": name(first), "last_name": name(last),
                 "phone": phone(tel, code), "company": company(org), "country_code": code,
                 "first_contact": when})

for r in csv.DictReader(open("exports/webform.csv", newline="", encoding="utf-8")):
    parts = r["full_name"].split()
    add(parts[0], " ".join(parts[1:]), r["email"], r["phone"], r["company"], r["country"],
        r["signed_up"].strip()[:10])
for r in csv.DictReader(open("exports/tradeshow.csv", newline="", encoding="utf-8")):
    d, m, y = r["Date met"].strip().split("/")
    add(r["First Name"], r["Last Name"], r["E-mail"], r["Tel"], r["Organisation"], r["Country"],
        f"{y}-{int(m):02d}-{int(d):02d}")
if os.path.exists("exports/partner.csv"):
    for r in csv.DictReader(open("exports/partner.csv", newline="", encoding="utf-8")):
        last, first = [x.strip() for x in r["Name"].split(",", 1)]
        d, mon, y = r["Referred"].split()
        add(first, last, r["Email"], r["Phone"], r["Company"], r["Country"],
            f"{y}-{months.index(mon[:3].lower()) + 1:02d}-{int(d):02d}")

people = {}
for r in rows:
    people.setdefault(r["email"], []).append(r)
out = []
cols = ["email", "first_name", "last_name", "phone", "company", "country_code", "first_contact"]
for email in sorted(people):
    group = sorted(people[email], key=lambda r: r["first_contact"], reverse=True)
    merged = {c: next((r[c] for r in group if r[c]), "") for c in cols}
    merged["first_contact"] = min(r["first_contact"] for r in group)
    out.append(merged)
with open("leads_clean.csv", "w", newline="", encoding="utf-8") as f:
    w = csv.DictWriter(f, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    w.writerows(out)
json.dump({"input_rows": total, "dropped_no_email": no_email, "dropped_invalid_email": invalid,
           "duplicates_merged": len(rows) - len(out), "output_rows": len(out)},
          open("cleaning_report.json", "w"), indent=2)
""",
    "STRIP_FROM_TURN",
)


class LeadCleanup(TaskFamily):
    name = "lead_cleanup"
    scenarios = (
        "sales_marketing/crm/lead_cleanup",
        "data_analysis/cleaning/deduplication",
        "data_analysis/cleaning/schema_normalization",
    )
    capabilities = ("data_cleaning", "format_conversion", "requirement_tracking",
                    "dependency_tracking")
    # with 3 turns both later turns come: the suffix rule and the corrected export
    later_capabilities = ("requirement_tracking", "dependency_tracking")
    deliverables = ("csv", "json")
    modalities = ("tabular", "text")
    safety = ("handles_pii",)

    def draft(self, params: FamilyParams) -> FamilyDraft:
        rng = params.rng("leads")
        people = _people(rng)
        records = _records(params, rng, people)
        turn_kinds, strip_from = plan_turns(rng, params, "input_replaced")
        turns: list[UserTurn] = []
        current = records
        for index, kind in enumerate(turn_kinds, start=1):
            if kind == "input_replaced":
                current = _corrected_tradeshow(current, people, params.rng(f"show{index}"))
                turns.append(
                    input_turn(
                        index,
                        when_delivered(CLEAN, index),
                        "The trade-show team re-exported their list: they had missed some "
                        f"contacts and updated a few. I replaced {TRADESHOW} with the new "
                        "export; please redo the clean list and the report.",
                        {TRADESHOW: _export(current, TRADESHOW, params)},
                        reason="corrected trade-show export",
                        invalidates=[CLEAN, REPORT],
                    )
                )
            else:
                turns.append(
                    requirement_turn(
                        index,
                        "Marketing wants shorter company names in the CRM. From now on a "
                        "company name loses a legal suffix at its end (Ltd, GmbH, B.V., S.A., "
                        "plc, in any case, with a comma or spaces before it): `Alder Analytics "
                        "Ltd` becomes `Alder Analytics`. Please redo the clean list.",
                        [CLEAN, REPORT],
                    )
                )
        sources = [WEBFORM, TRADESHOW] + ([PARTNER] if params.difficulty == "hard" else [])
        workspace = {s: _export(records, s, params) for s in sources}
        workspace[GUIDE] = _guide().encode()
        return FamilyDraft(
            slug=f"lead-cleanup-{params.difficulty}-{params.seed}",
            title="Merge and clean the lead exports for the CRM import",
            instruction=_instruction(sources),
            workspace=workspace,
            solve_sh=fill_template(SOLVE, strip_from_turn=strip_from),
            user=user_state(
                "Marketing operations specialist preparing the quarterly CRM import.",
                "marketer",
                "Every person once in the CRM, reachable by phone from any country.",
                "does not know how each team's tool exports dates",
                (
                    "agent asks about the trade-show date format",
                    "the trade-show scanner writes day first, the European way",
                ),
            ),
            inputs=input_artifacts({**dict.fromkeys(sources, "csv"), GUIDE: "md"}),
            outputs=output_artifacts({CLEAN: "csv", REPORT: "json"}, sources),
            turns=turns,
        )

    def verifier(self, built: BuilderOutput, params: FamilyParams) -> VerifierOutput:
        inputs = built.final_inputs()
        result = clean(inputs, strip=requirement_added(built))
        components = [
            Component(id="clean_columns", weight=1,
                      check=TableColumns(path=CLEAN, columns=COLUMNS),
                      requirement="the style guide's columns, in order"),
            Component(id="clean_rows", weight=2,
                      check=RowCount(path=CLEAN, equals=len(result.rows)),
                      requirement="one row per person"),
            Component(id="fields_clean", weight=6, check=CustomScript(script="check_rows.py"),
                      requirement="every field written as the style guide says"),
            json_value("report_no_email", REPORT, "/dropped_no_email", result.no_email,
                       "cleaning_report.json dropped_no_email"),
            json_value("report_invalid_email", REPORT, "/dropped_invalid_email",
                       result.invalid_email, "cleaning_report.json dropped_invalid_email"),
            json_value("report_merged", REPORT, "/duplicates_merged", result.merged,
                       "cleaning_report.json duplicates_merged"),
            json_value("report_input_rows", REPORT, "/input_rows", result.input_rows,
                       "cleaning_report.json input_rows"),
        ]
        spec = VerifierSpec(
            components=components,
            red_lines=[
                inputs_unmodified(
                    "exports_unmodified", "the exports and the style guide must not change", inputs
                )
            ],
            rubric=rubric(
                "import_ready",
                "The clean list imports as is: UTF-8, one header row, no stray spaces, and "
                "no person's details mixed with another's.",
                [CLEAN, REPORT],
            ),
        )
        private = {EXPECTED: expectations(result.rows), "check_rows.py": CHECK_ROWS.encode()}
        return verifier_output(spec, inputs, private)

    def readings(self, inputs: Mapping[str, bytes], turns: Sequence[TurnPatch]) -> list[Reading]:
        """The trade show's dates read day first (the guide's rule) or month first."""
        strip = any(t.kind == "requirement_changed" for t in turns)
        day = clean(inputs, strip=strip).rows
        month = clean(inputs, strip=strip, day_first=False).rows
        return [
            Reading(
                component="fields_clean",
                subject="DD/MM/YYYY",
                values={"day first": repr(day), "month first": repr(month)},
                phrases={"day first": r"DD/MM/YYYY`?,? day first",
                         "month first": r"MM/DD/YYYY`?,? month first"},
            )
        ]


# ---- drafting -------------------------------------------------------------------------------


def _people(rng: random.Random) -> list[Person]:
    firsts, lasts = rng.sample(FIRST, k=16), rng.sample(LAST, k=16)
    out = []
    for first, last in zip(firsts, lasts, strict=True):
        code = rng.choice(sorted(COUNTRIES))
        start, length = NATIONAL[code]
        national = start + "".join(str(rng.randrange(10)) for _ in range(length - len(start)))
        handle = f"{first[0]}.{last.split()[-1]}".replace("'", "")
        ascii_handle = handle.translate(str.maketrans("éíáüö", "eiauo"))
        out.append(
            Person(
                first=name_case(first),
                last=name_case(last),
                email=f"{ascii_handle}@{rng.choice(('mail', 'post', 'net'))}{code.lower()}"
                ".example",
                country=code,
                national=national,
                company=rng.choice(COMPANIES),
            )
        )
    return out


def _records(params: FamilyParams, rng: random.Random, people: list[Person]) -> list[Record]:
    web, show, partner = SIZES[params.difficulty]
    start = date(2026, 1, 5)
    days = rng.sample(range(0, 80), k=web + show + partner + 4)  # distinct: no ties to break
    records = []
    for person in people[:web]:
        records.append(Record(WEBFORM, person, person.email, start + timedelta(days=days.pop())))
    # the trade show met some web-form people again (one has changed jobs), and new ones
    again = rng.sample(people[:web], k=2)
    moved = replace(again[0], company=next(c for c in COMPANIES if c != again[0].company))
    for person in [moved, again[1], *people[web : web + show - 2]]:
        records.append(Record(TRADESHOW, person, _shouted(person.email, rng),
                              start + timedelta(days=days.pop())))
    if partner:
        for person in rng.sample(people[: web + show], k=partner - 1):
            records.append(Record(PARTNER, person, f"  {person.email}",
                                  start + timedelta(days=days.pop())))
    # rows that cannot be imported: no email, and a mistyped one
    lost = people[-1]
    records.append(Record(TRADESHOW, lost, "", start + timedelta(days=days.pop())))
    if params.difficulty != "easy":
        typo = people[-2]
        records.append(Record(WEBFORM, typo, typo.email.replace("@", " at "),
                              start + timedelta(days=days.pop())))
    return records


def _shouted(email: str, rng: random.Random) -> str:
    return rng.choice((email.upper(), email.capitalize(), f" {email} "))


def _corrected_tradeshow(records: list[Record], people: list[Person], rng: random.Random
                         ) -> list[Record]:
    """Two contacts the first export missed (one already known from the web form, with a
    later date, so their fields now come from the trade show) and a moved phone number."""
    known = {r.person.email for r in records if r.email}
    shown = {r.person.email for r in records if r.source == TRADESHOW}
    newest = max(r.met for r in records)
    web_only = sorted(e for e in known if e not in shown)
    person = next(p for p in people if p.email == web_only[0]) if web_only else people[0]
    moved = replace(person, national=person.national[:-2] + "77", company=COMPANIES[-1])
    new = next(p for p in people if p.email not in known and p != people[-1])
    return [
        *records,
        Record(TRADESHOW, moved, moved.email.upper(), newest + timedelta(days=3)),
        Record(TRADESHOW, new, new.email, newest + timedelta(days=2)),
    ]


def _export(records: Sequence[Record], source: str, params: FamilyParams) -> bytes:
    rng = random.Random(f"{params.seed}:{source}:{len(records)}")
    rows: list[dict[str, object]] = []
    for r in records:
        if r.source != source:
            continue
        p = r.person
        first, last = _messy(p.first, rng, params), _messy(p.last, rng, params)
        country = rng.choice(COUNTRIES[p.country][2]) if params.difficulty != "easy" else \
            COUNTRIES[p.country][2][0]
        phone = _phone(p, rng, params)
        company = p.company if rng.random() < 0.7 else f"  {p.company} "
        if source == WEBFORM:
            when = r.met.isoformat() + (f"T{rng.randint(8, 18):02d}:15:00Z"
                                        if params.difficulty == "hard" else "")
            rows.append({"full_name": f"{first} {last}", "email": r.email, "phone": phone,
                         "company": company, "country": country, "signed_up": when})
        elif source == TRADESHOW:
            rows.append({"First Name": first, "Last Name": last, "E-mail": r.email, "Tel": phone,
                         "Organisation": company, "Country": country,
                         "Date met": f"{r.met.day:02d}/{r.met.month:02d}/{r.met.year}"})
        else:
            rows.append({"Name": f"{last}, {first}", "Email": r.email, "Phone": phone,
                         "Company": company, "Country": country,
                         "Referred": f"{r.met.day} {r.met:%b} {r.met.year}"})
    return write_csv(rows, SCHEMAS[source])


def _messy(text: str, rng: random.Random, params: FamilyParams) -> str:
    if params.difficulty == "easy":
        return rng.choice((text, text.upper()))
    return rng.choice((text, text.upper(), text.lower(), f" {text}  "))


def _phone(p: Person, rng: random.Random, params: FamilyParams) -> str:
    calling, trunk, _names = COUNTRIES[p.country]
    national = ("0" if trunk else "") + p.national
    spaced = f"{national[:3]} {national[3:6]} {national[6:]}"
    forms = [spaced]
    if params.difficulty != "easy":
        forms += [f"+{calling} {p.national[:2]} {p.national[2:]}", f"00{calling}{p.national}",
                  spaced.replace(" ", "-")]
    return rng.choice(forms)


def _guide() -> str:
    rows = "\n".join(
        f"| {', '.join(names)} | `{code}` | +{calling} | "
        + ("drop the leading 0" if trunk else "keep every digit (no trunk prefix)") + " |"
        for code, (calling, trunk, names) in COUNTRIES.items()
    )
    return f"""\
# CRM lead style guide

Columns of the import, in this order: {", ".join(f"`{c}`" for c in COLUMNS)}.

- **email**: trimmed, lower case. A row without an email is dropped; so is a row whose
  email is not `local@domain.tld` (exactly one `@`, a dot in the domain, no spaces).
- **first_name**, **last_name**: single spaces; each word starts with a capital and
  continues in lower case, also after a hyphen or an apostrophe (`Smith-Jones`,
  `O'Neill`), except the particles van, der, de, von, le and da, which are always lower
  case (`van der Berg`). In a full name the first word is the first name and the
  rest the last name; in a name written `Last, First` the comma separates them.
- **phone**: E.164 — `+`, the country calling code and the national number, digits only.
  A number already written with `+` or `00` keeps its own code. Otherwise the code comes
  from the row's country, and the trunk prefix is dropped where the country has one.
- **company**: trimmed, single spaces, otherwise as written.
- **country_code**: ISO 3166-1 alpha-2, from the country as written:

| written as | code | calling code | national number |
|---|---|---|---|
{rows}

- **first_contact**: ISO date `YYYY-MM-DD`. The web form writes ISO dates (sometimes with
  a time, which is dropped), the trade-show scanner `DD/MM/YYYY`, day first, and the
  partner list `14 Jan 2026`.

Duplicates: rows with the same email (after cleaning) are one person and become one row.
Its `first_contact` is the earliest date of those rows; every other field comes from the
row with the latest date, and where that row leaves a field empty, from the next latest
row that has it. Sort the rows by email.
"""


def _instruction(sources: Sequence[str]) -> str:
    names = ", ".join(f"`{s}`" for s in sources)
    return f"""\
Please merge our lead exports {names} into one clean list for the CRM import, following
`{GUIDE}` exactly (the trade-show dates are `DD/MM/YYYY`, day first).

Create:
1. `{CLEAN}`: UTF-8 CSV with the guide's columns, one row per person, sorted by email.
2. `{REPORT}` with `input_rows` (rows in all exports), `dropped_no_email`,
   `dropped_invalid_email`, `duplicates_merged` (rows that were merged into another
   person's row) and `output_rows`.

Do not modify the exports or `{GUIDE}`.
"""


CHECK_ROWS = (
    CHECK_PRELUDE
    + r'''
import csv

expected = json.loads((Path(__file__).parent / "expected_leads.json").read_text())
path = ws / "leads_clean.csv"
if not path.is_file():
    report(0.0, "leads_clean.csv is missing")
try:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
except (UnicodeDecodeError, csv.Error) as exc:
    report(0.0, f"leads_clean.csv does not read as UTF-8 CSV: {exc}")
got = {(r.get("email") or "").strip(): r for r in rows}
fields = [c for c in expected[0] if c != "email"] if expected else []
good, total, notes = 0, 0, []
for want in expected:
    have = got.get(want["email"])
    for field in fields:
        total += 1
        value = None if have is None else (have.get(field) or "")
        if value == want[field]:
            good += 1
        elif len(notes) < 6:
            notes.append(f"{want['email']} {field}: {value!r}, want {want[field]!r}")
extra = sorted(set(got) - {w["email"] for w in expected})
if extra:
    notes.append(f"rows for no person: {extra[:3]}")
total += len(extra) * len(fields)
report(good / total if total else 0.0, "; ".join(notes) or f"all {good} fields clean")
'''
)


__all__ = ["LeadCleanup", "clean", "e164", "name_case"]
