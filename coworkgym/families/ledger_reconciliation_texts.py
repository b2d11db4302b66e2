"""The phrasing banks of the hard ledger close's ``notes.md``: the broker's settlement desk
saying which trade(s) a transfer settles, the bank saying which charge a refund returns.

Every message is written *from* its structured truth (``Remittance``, ``Refund`` in
``ledger_reconciliation_notes``); nothing is ever parsed back out of the text. Each meaning
has at least eight phrasings, drawn per message, and each distractor (``Story``) frames the
plain statement so that a keyword script reading the first or the last trade id gets it
wrong while a reader gets it right: a trade named only to be denied, a correction after a
slip, a past trade mentioned in a PS, an old question quoted above the answer, a forwarded
message about another trade below it, an earlier note withdrawn by a later one.

``plain`` is the one sentence of a message that states its meaning without a distractor;
the tests check that every message contains it.
"""

from __future__ import annotations

import random
from datetime import date

# How a message frames its plain statement (what a keyword script trips on).
PLAIN, DENIED, CORRECTED, POSTSCRIPT, QUOTED, FORWARDED = (
    "plain",
    "denied",  # another trade named first, to be denied
    "corrected",  # another trade named first, then corrected ("sorry, wrong number")
    "postscript",  # a past trade named last, in a PS
    "quoted",  # an older question about another trade quoted above the answer
    "forwarded",  # a forwarded message about another trade below the answer
)
STORIES = (PLAIN, DENIED, CORRECTED, POSTSCRIPT, QUOTED, FORWARDED)

# The desk's senders: the brokers' trading names differ from message to message.
BROKERS = (
    ("Halvorsen Securities", ("Halvorsen Sec.", "HSEC settlements", "Halvorsen")),
    ("Marlow & Pike", ("Marlow Pike Ltd", "M&P ops", "Marlow and Pike")),
    ("Ostrander Capital Markets", ("OCM", "Ostrander CM", "Ostrander Capital")),
)
SENDERS = (
    "Dana Whitfield",
    "Priya Raman",
    "Tomasz Wrona",
    "Aoife Keane",
    "Luis Ortega",
    "Mei Lin Ho",
    "Sam Okafor",
    "Ingrid Berg",
)
GREETINGS = (
    "Hello,",
    "Hi,",
    "Good morning,",
    "Dear colleagues,",
    "Hello team,",
    "Good afternoon,",
    "Hi all,",
    "Dear fund accounting,",
)
CLOSINGS = (
    "Best regards,",
    "Kind regards,",
    "Thanks,",
    "Regards,",
    "Many thanks,",
    "With best wishes,",
    "Cheers,",
    "Thank you,",
)
TITLES = (
    "Settlements Officer",
    "Senior Settlements Analyst",
    "Operations Associate",
    "Head of Settlements",
    "Client Operations",
    "Trade Support",
    "Middle Office Analyst",
    "Payments Specialist",
)
QUERIES = (  # our own question, quoted below a reply (names the transfer, never a trade)
    "> On {asked}, Fund accounting wrote:\n> Could you tell us what your transfer {ref} is "
    "for? We cannot match it to our books.",
    "> On {asked}, Fund accounting wrote:\n> We received {ref} without a usable reference. "
    "Which trade does it settle?\n> Thanks in advance.",
    "> From: Fund accounting\n> Sent: {asked}\n> Subject: unidentified transfer\n>\n> Hi, "
    "please advise on {ref}; the reference field is of no help.",
    "> On {asked}, Fund accounting wrote:\n> Our month-end reconciliation shows {ref} "
    "unallocated. Can you help?",
)
DISCLAIMERS = (
    "This message is for the named recipient only. If you received it in error, please "
    "delete it and tell the sender. We never ask for bank details by e-mail. Payment "
    "instructions received by e-mail are always confirmed by a call-back on a number we "
    "already hold.",
    "Confidential: settlement correspondence. Calls may be recorded for compliance and "
    "training. Registered office as on our website. Authorised and regulated by the "
    "Financial Conduct Authority.",
    "Please consider the environment before printing this e-mail. Settlement cut-off is "
    "15:00 on business days; instructions after it are processed the next day.",
    "The information in this e-mail is confidential and may be legally privileged. Any "
    "unauthorised use or disclosure is prohibited. E-mail is not a secure medium; we accept "
    "no liability for changes made to this message after it was sent.",
)

# ---- the plain statements --------------------------------------------------------------

SETTLES_ONE = (
    "Our transfer {ref} of {amount} on {day} settles {trade}.",
    "The movement that reached your account on {day} under reference {ref} is for trade {trade}.",
    "{ref} ({amount}, {day}) is the settlement of {trade}.",
    "Please allocate {ref} to {trade}.",
    "The {amount} booked on {day} as {ref} covers your trade {trade}.",
    "For your records: {ref} pays {trade}, nothing else.",
    "Transfer {ref} of {day} relates to trade {trade}.",
    "You can match {ref} against {trade}: it is that trade's settlement.",
    "We settled {trade} with the transfer {ref} on {day}.",
)
SETTLES_TWO = (
    "Our transfer {ref} of {amount} on {day} settles two trades in one go: {first} and {second}.",
    "{ref} ({amount}) covers {first} and {second} together; we combined them to save a wire.",
    "The {amount} of {day} ({ref}) is the settlement of both {first} and {second}.",
    "Please allocate {ref} to two trades, {first} and {second}.",
    "Two trades were paid in one transfer, {ref}: {first} and {second}.",
    "{ref} on {day} pays {first} as well as {second}.",
    "For your records, {ref} is the joint settlement of {first} and {second}.",
    "We netted nothing: {ref} simply settles {first} plus {second} in one amount.",
)
WRONG_REFERENCE = (  # the statement's id shows {shown}; the trade is {trade}
    "The reference on our transfer {ref} is wrong: our clerk typed {shown}, but the payment "
    "settles {trade}.",
    "{ref} went out with reference {shown} by mistake. It is the settlement of {trade}.",
    "Please disregard the reference {shown} on {ref}; that transfer pays {trade}.",
    "{ref} settles {trade}. The reference field says {shown}, which is a keying slip on our side.",
    "Our system printed {shown} on {ref}; the trade it pays is {trade}.",
    "A correction to the reference of {ref}: it reads {shown} on your statement, but it "
    "belongs to {trade}.",
    "{ref} belongs to {trade}, whatever the reference {shown} on it suggests.",
    "The transfer {ref} carries the wrong trade number ({shown}); it is for {trade}.",
)
WITHDRAWN = (  # a later note withdraws what an earlier one said ({was}) about {ref}
    "Please ignore my note of {then} about {ref}: that transfer was for {trade}, not {was}.",
    "I have to correct my message of {then}. {ref} settles {trade}; I named {was} by mistake.",
    "Scratch what I wrote on {then} about {ref}. It pays {trade}. {was} is not involved.",
    "Update to my note of {then}: {ref} is the settlement of {trade}, not of {was}.",
    "My e-mail of {then} gave the wrong trade for {ref}. The right one is {trade}.",
    "Correction to {then}: {ref} was for {trade}. Please forget {was} in that context.",
    "Regarding {ref}, please disregard my earlier note of {then}. The transfer settles {trade}.",
    "We looked again at {ref}: contrary to my note of {then}, it is for {trade}, not {was}.",
)
REFUND = (  # the bank refunds part of one kind of charge
    "The credit {ref} of {amount} on {day} refunds part of the {charge} we charged you.",
    "{ref} ({amount}) is a refund of the {charge}, after your complaint.",
    "We have returned {amount} of the {charge} with the credit {ref} on {day}.",
    "Please note that {ref} reverses part of a {charge}.",
    "The {amount} credited on {day} ({ref}) gives back part of the {charge}.",
    "For your records: {ref} is our refund of the {charge}.",
    "Credit {ref} is a goodwill refund on the {charge}.",
    "{ref} on {day} refunds {amount} of the {charge}, as agreed with your manager.",
)

# ---- the distractors -------------------------------------------------------------------

DENIALS = (  # a trade named first, only to be denied
    "This has nothing to do with {other}, which settled on {then}.",
    "Not {other}: that one went through on {then}.",
    "You asked whether {ref} was for {other}. It is not.",
    "Before anything else: {other} is settled already ({then}), so {ref} is not that one.",
    "It is not the settlement of {other}, as your team guessed.",
    "{other} does not come into it; we paid that on {then}.",
    "Your query mentions {other}, but that trade is not what {ref} pays.",
    "Whatever our system suggested, {ref} is not for {other}.",
)
SLIPS = (  # a trade named first by mistake, corrected after the plain statement
    "{ref} settles {other}.",
    "The transfer {ref} pays {other}.",
    "{ref} is for {other}.",
    "Please allocate {ref} to {other}.",
    "{ref} relates to {other}.",
    "We paid {other} with {ref}.",
    "{ref} covers {other}.",
    "Match {ref} to {other}.",
)
CORRECTIONS = (
    "Sorry, I gave you the wrong number: it is {trade}, not {other}.",
    "Apologies, that number is wrong. The trade is {trade}.",
    "Correction: I meant {trade}, not {other}.",
    "Wait, my mistake: {other} is the wrong trade; it is {trade}.",
    "Sorry, typo: read {trade} instead of {other}.",
    "Please read {trade} where I wrote {other} above; my error.",
    "No, scratch that: the trade is {trade}.",
    "I mis-typed that: the correct trade is {trade}.",
)
POSTSCRIPTS = (
    "PS: {other} was settled back on {then}, in case you wondered.",
    "PS: the confirmation for {other} went out separately on {then}.",
    "P.S. We still have {other} (settled {then}) on our list of old queries; ignore it.",
    "PS: your colleague asked about {other} too; that one was paid on {then}.",
    "PS: unrelated, but {other} is confirmed on our side since {then}.",
    "P.S. {other} needs nothing from you; it cleared on {then}.",
    "PS: for the avoidance of doubt, {other} was a separate transfer on {then}.",
    "PS: last month's query about {other} is closed (settled {then}).",
)
QUOTES = (
    "> Could you confirm that {other} has settled?",
    "> We cannot find the settlement of {other}. Has it gone out?",
    "> Is {other} still open on your side?",
    "> Please confirm the amount of {other}.",
    "> Our records show {other} as unsettled; can you check?",
    "> Which transfer paid {other}?",
    "> Did the {other} trade go through?",
    "> A quick one: {other}, settled or not?",
)
QUOTE_ANSWERS = (
    "{other} settled on {then}, yes. As for the new transfer:",
    "That one went on {then}. Now, about {ref}:",
    "{other} was paid on {then}. Separately:",
    "Yes, {other} is done ({then}). And the other thing you asked:",
    "Settled {then}. On a different point:",
    "{other} cleared on {then}. Regarding {ref}:",
    "All done on {then}. Then {ref}:",
    "It went out on {then}. Moving on to {ref}:",
)
FORWARDS = (
    "---------- Forwarded message ----------\nFrom: confirmations desk\nSubject: {other}\n\n"
    "Confirmation of {other} attached.",
    "-----Original Message-----\nSubject: query {other}\n\nCan someone check {other} please?",
    "Begin forwarded message:\n\n> Trade {other} booked, awaiting your instructions.",
    "---- Forwarded ----\n> FYI {other} is on the list for tomorrow's run.",
    "-------- Original message --------\n> Re: {other} allocation sheet",
    "Forwarded from our back office:\n> {other}: allocation confirmed.",
    "---------- Forwarded message ----------\n> Please hold {other} until Friday.",
    "Below our earlier exchange:\n> Did you get the contract note for {other}?",
)
REFUND_DENIALS = (
    "This is not a {other} refund; your {other} was charged correctly.",
    "Not the {other}: that one stands.",
    "You mentioned the {other}, but we are not refunding that.",
    "The {other} is unaffected.",
    "It has nothing to do with the {other}.",
    "Your {other} was right, so nothing comes back on it.",
    "Unlike what your team assumed, this is not about the {other}.",
    "The {other} remains as charged.",
)
FILLERS = (
    "Our settlement cut-off moves to 14:00 from next month. Nothing changes for trades "
    "already booked.",
    "We are migrating our payment system over the weekend; references may look different "
    "for a few days but the amounts will not change.",
    "The office is closed on Monday for the holiday. Transfers instructed that day go out on "
    "Tuesday.",
    "Please send statements for our records to the new shared mailbox from now on.",
    "A reminder that our fee schedule for next year is attached to the client portal.",
    "Our auditors will send you a confirmation request; please answer it directly to them.",
    "We have a new head of settlements; introductions by e-mail next week.",
    "Could your team update our contact details? The old fax number is no longer in use.",
)


def _money(amount: float) -> str:
    return f"{abs(amount):,.2f}"


def long_day(day: date) -> str:
    return f"{day.day} {day:%B %Y}"


def wrap(
    rng: random.Random,
    middle: str,
    sender: str,
    firm: str,
    ref: str = "",
    day: date | None = None,
    amount: float = 0.0,
) -> str:
    """A greeting, the message's middle, a closing, a signature and the firm's footer; with
    ``ref``, the transfer's payment details (``day``, ``amount``) and often our own
    question about it quoted at the bottom."""
    phone = f"+44 20 7946 {rng.randint(1000, 9999)}"
    quoted = details = ""
    if ref and day is not None:
        if rng.random() < 0.8:
            quoted = "\n\n" + rng.choice(QUERIES).format(ref=ref, asked=long_day(day))
        if rng.random() < 0.85:
            details = (
                f"\n\nPayment details\n  Value date:  {long_day(day)}\n  Amount:      "
                f"{_money(amount)}\n  Bank ref:    {ref}\n  Currency:    USD\n  Channel:     "
                f"{rng.choice(('SWIFT MT103', 'SWIFT MT202', 'Fedwire', 'Book transfer'))}"
            )
    return (
        f"{rng.choice(GREETINGS)}\n\n{middle}{details}\n\n{rng.choice(CLOSINGS)}\n{sender}\n"
        f"{rng.choice(TITLES)} | {firm} | {phone}\n\n-- \n{rng.choice(DISCLAIMERS)}{quoted}"
    )


def remittance_message(
    rng: random.Random,
    *,
    ref: str,
    trades: tuple[str, ...],
    shown: str,
    story: str,
    other: str,
    day: date,
    amount: float,
    then: date,
) -> tuple[str, str]:
    """The desk's message about transfer ``ref`` (body, plain statement). ``trades`` is what
    it settles; ``shown`` the wrong trade id the statement shows (or ""); ``other`` the
    trade the ``story`` names as a distractor; ``then`` a past day for that distractor."""
    values = {
        "ref": ref,
        "amount": _money(amount),
        "day": long_day(day),
        "other": other,
        "then": long_day(then),
        "shown": shown,
    }
    if len(trades) == 2:
        plain = rng.choice(SETTLES_TWO).format(first=trades[0], second=trades[1], **values)
    elif shown:
        plain = rng.choice(WRONG_REFERENCE).format(trade=trades[0], **values)
    else:
        plain = rng.choice(SETTLES_ONE).format(trade=trades[0], **values)
    if story == DENIED:
        middle = f"{rng.choice(DENIALS).format(**values)} {plain}"
    elif story == CORRECTED:
        slip = rng.choice(SLIPS).format(**values)
        correction = rng.choice(CORRECTIONS).format(trade=trades[0], **values)
        # the slip and its correction first, then the plain statement a reader can rely on
        middle = f"{slip} {correction}\n\n{plain}"
    elif story == POSTSCRIPT:
        middle = f"{plain}\n\n{rng.choice(POSTSCRIPTS).format(**values)}"
    elif story == QUOTED:
        quote, answer = rng.choice(QUOTES), rng.choice(QUOTE_ANSWERS)
        middle = f"{quote.format(**values)}\n\n{answer.format(**values)} {plain}"
    elif story == FORWARDED:
        middle = f"{plain}\n\n{rng.choice(FORWARDS).format(**values)}"
    else:
        middle = plain
    return middle, plain


def withdrawal_message(rng: random.Random, *, ref: str, trade: str, was: str, then: date) -> str:
    """A later message withdrawing an earlier one that named ``was`` for ``ref``."""
    return rng.choice(WITHDRAWN).format(ref=ref, trade=trade, was=was, then=long_day(then))


def refund_message(
    rng: random.Random, *, ref: str, charge: str, other: str, day: date, amount: float
) -> tuple[str, str]:
    """The bank's message about refund ``ref`` of part of a ``charge`` (body, plain)."""
    plain = rng.choice(REFUND).format(
        ref=ref, charge=charge.lower(), amount=_money(amount), day=long_day(day)
    )
    if not other:
        return plain, plain
    denial = rng.choice(REFUND_DENIALS).format(other=other.lower())
    return (f"{denial} {plain}" if rng.random() < 0.5 else f"{plain} {denial}"), plain


def filler(rng: random.Random) -> str:
    return rng.choice(FILLERS)


def firm_name(rng: random.Random) -> str:
    """A broker under one of its names (the trading names vary)."""
    legal, aliases = rng.choice(BROKERS)
    return rng.choice((legal, *aliases))


__all__ = [
    "CORRECTED",
    "DENIED",
    "FORWARDED",
    "PLAIN",
    "POSTSCRIPT",
    "QUOTED",
    "SENDERS",
    "STORIES",
    "filler",
    "firm_name",
    "long_day",
    "refund_message",
    "remittance_message",
    "withdrawal_message",
    "wrap",
]
