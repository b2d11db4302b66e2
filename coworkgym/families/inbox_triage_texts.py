"""The phrasing banks of inbox_triage's ``hard`` tier: what customers mean, said many ways.

Every text is written *from* a structured truth (a thread's category, the order it concerns,
whether a message closes the matter): ``first_body`` renders a first message from its
category and order, ``follow_up``/``closing``/``correction`` the later ones. Each meaning has
at least eight paraphrases, drawn per seed, and each rendered item holds one plain statement
of its meaning (``CONCERNS``, ``CLOSINGS``, ``CORRECTIONS``). Around it sit distractors a
keyword script misreads and a careful reader does not: a category denied ("this is not about
the invoice"), a past event mentioned in passing, an older mail forwarded below the new
question, a signature line, an earlier order's number, a follow-up that says "resolved" or
"closed" without closing anything.
"""

from __future__ import annotations

import random

CATEGORIES = ("security", "incident", "refund", "billing", "request")

# What the customer asks of us now, by category; {order} is the order it concerns.
CONCERNS: dict[str, tuple[str, ...]] = {
    "security": (
        "Two of our staff received a mail that looked exactly like your sign-in page, and one "
        "of them typed her password into it. The account belongs to the service on order "
        "{order}; please help us lock it down.",
        "We see sign-ins to the mailboxes on order {order} from countries none of us has "
        "been to. We think someone else has our credentials.",
        "A laptop set up under order {order} was stolen from a car last night, with saved "
        "passwords on it. We need its access revoked everywhere.",
        "Our finance lead clicked a link in a fake delivery notice, and since then her "
        "account (order {order}) has been sending mail she did not write.",
        "Somebody shared the client folder of the file service on order {order} with an "
        "outside address we do not know. We suspect an intruder and need it investigated.",
        "An unknown admin account appeared on the firewall you manage for us under order "
        "{order}. Nobody here created it.",
        "We believe an attacker got into the remote desktop server on order {order}: files "
        "were renamed overnight and a ransom note is on the desktop.",
        "A former contractor still seems to be signing in to the portal on order {order} "
        "with his old password, two months after he left. Please treat this as a possible "
        "compromise.",
    ),
    "incident": (
        "Since about eight this morning nobody here can open the customer portal on order "
        "{order}; the page just keeps loading. Could you look into it?",
        "The VPN you set up under order {order} keeps dropping every few minutes, so our "
        "remote staff cannot work today.",
        "The nightly backup on order {order} has not run for two nights; the dashboard shows "
        "both jobs as failed.",
        "None of the printers on order {order} print any more since yesterday's update; the "
        "jobs sit in the queue.",
        "Mail to and from our domain stopped arriving about an hour ago. It is the hosted "
        "mail service on order {order}.",
        "The Wi-Fi at our second site (order {order}) is gone since this morning; staff "
        "there are working from their phones.",
        "The phone system on order {order} rings on no desk since the morning; callers hear "
        "silence.",
        "Our shared drive on order {order} cannot be reached from any machine today, so the "
        "whole office is stuck.",
    ),
    "refund": (
        "We sent the two docking stations from order {order} back last week, unopened. "
        "Please refund them to the card we paid with.",
        "Order {order} was charged to our card twice. Please pay the second charge back "
        "to us.",
        "We cancelled the training course on order {order} well before the deadline, so we "
        "would like our money back for it.",
        "Three of the licences on order {order} were never activated, as agreed at the "
        "time. Please return what we paid for them.",
        "The monitor delivered on order {order} arrived broken, and we do not want a "
        "replacement: please reimburse us instead.",
        "We overpaid order {order} by mistake (the full amount twice). Could you send the "
        "difference back to our account?",
        "The on-site visit booked on order {order} never happened, as your engineer was "
        "ill. We would like the fee for it refunded.",
        "We returned the unused toner from order {order} within the 30 days. Please credit "
        "the money back to us.",
    ),
    "billing": (
        "I'm not asking for my money back, I just need the invoice for order {order} "
        "corrected: it shows our old company address.",
        "The invoice for order {order} lists twelve seats; we have ten. Could you send a "
        "corrected invoice? We will pay the corrected amount.",
        "Our accounts team needs the invoice for order {order} reissued with our new VAT "
        "number before they can pay it.",
        "We received a payment reminder for order {order}, but we paid it on the 2nd. Could "
        "you check your records and confirm?",
        "Could you split the invoice for order {order} into two, one per site? Our auditors "
        "ask for that.",
        "The invoice for order {order} is in dollars, but our contract says euros. Please "
        "issue it in euros.",
        "Please change the payment terms on the invoice for order {order} to 30 days, as "
        "agreed in the contract; it says 14.",
        "We cannot find the invoice for order {order} in the portal. Could you send us a "
        "copy so we can pay it?",
    ),
    "request": (
        "Please set up accounts for two new starters joining on Monday, with the standard "
        "laptop image from order {order}.",
        "Could you add the new second-floor printer to everyone's machines? It came with "
        "order {order}.",
        "Please create a shared mailbox for our reception team on the mail plan of order "
        "{order}.",
        "Could you give our finance team read access to the file archive on order {order}?",
        "Please move the two laptops from order {order} to our new office next week and set "
        "them up there.",
        "We would like to add five more users to the plan on order {order} from next month.",
        "Could you change the guest Wi-Fi password on order {order} before our open day "
        "next week?",
        "Please book an engineer to install the screens from order {order} in the meeting "
        "room, any day next week.",
    ),
}

# Details a customer adds to the concern (words of its own category only, or none).
DETAILS: dict[str, tuple[str, ...]] = {
    "security": (
        "We have already asked everyone to change their passwords.",
        "Nobody here has given permission for this.",
        "Our managing partner is very worried about client confidentiality.",
        "We have not told our clients yet and would like your advice first.",
    ),
    "incident": (
        "It affects about a dozen people here.",
        "We first noticed it at around half past seven.",
        "Restarting our own machines made no difference.",
        "Colleagues at home see the same thing.",
    ),
    "refund": (
        "The card statement shows the amount clearly.",
        "We can send the courier's receipt if you need it.",
        "Our finance officer would like it back before the month closes.",
        "Nothing else on the order is affected.",
    ),
    "billing": (
        "Our accounts team closes the month on Friday.",
        "Everything else on it looks right to us.",
        "The copy in the portal shows the same.",
        "The purchase order on our side has the right figures.",
    ),
    "request": (
        "There is no rush, any day this week or next is fine.",
        "Our office manager can let your engineer in.",
        "We are happy to pay the usual rate for this.",
        "Please let us know if you need anything from us first.",
    ),
}

# A sentence that says the thread is NOT about a category (a keyword script reads the word).
DENIALS: dict[str, tuple[str, ...]] = {
    "security": (
        "This is not a security problem, and nobody's password was compromised.",
        "No phishing or breach involved, before you ask.",
    ),
    "incident": (
        "Nothing is down and there is no error on our side; everything runs fine.",
        "This is not an outage report.",
    ),
    "refund": (
        "We are not asking for a refund.",
        "To be clear, this is not about getting money back.",
    ),
    "billing": (
        "This is not about an invoice or a payment.",
        "Our invoices are all in order; this is about something else.",
    ),
    "request": (),
}

# Something of a category that happened before, mentioned in passing.
PAST: dict[str, tuple[str, ...]] = {
    "security": (
        "Since the phishing training you ran last autumn our staff are careful, so this "
        "surprised us.",
        "After the breach scare in 2024 we keep an eye on these things.",
    ),
    "incident": (
        "By the way, the outage you fixed for us in January was handled very well.",
        "Last month's error on the file server is long fixed, thanks again.",
    ),
    "refund": (
        "The refund for last year's cancelled course came through quickly, which we "
        "appreciated.",
        "We got our money back for the faulty headsets in February without any fuss.",
    ),
    "billing": (
        "Your invoices have been correct all year, for what it is worth.",
        "We paid last quarter's invoice on time, as always.",
    ),
    "request": (),
}

# A signature line carrying a category's word, and one carrying another number.
SIGNATURE_LINES: dict[str, tuple[str, ...]] = {
    "security": ("Report phishing or a suspected breach to security@{domain}",),
    "incident": ("Out-of-hours outages: call our front desk",),
    "refund": ("Refund and credit questions: finance@{domain}",),
    "billing": ("Invoices and payments: ap@{domain}",),
    "request": (),
}

CONTEXT = (
    "We are about forty people across two offices.",
    "I am writing on behalf of our office manager, who is away this week.",
    "Our IT contact changed recently, so please use this address from now on.",
    "We are in the middle of our busiest month, so a quick answer would help.",
    "I have copied in nobody else for now.",
    "Happy to take a call if that is easier for you.",
    "Thanks for your help over the last year.",
    "We moved into the new building in January.",
    "Most of us are in the office from nine.",
    "Our director asked me to follow this up personally.",
    "Our reception desk is staffed from half past eight if you need to reach someone.",
    "We have a board meeting on Thursday, so I would like this settled before then.",
    "Please reply to this address rather than to my colleague's; she is part-time.",
    "Our auditors are in next week, which is why I am tidying everything up now.",
    "I tried your phone line first, but it was busy for a long time.",
    "If anything is unclear, my mobile number is in the signature below.",
)

FORWARD_NOTES = (
    "Below, for background only, is an older mail from a colleague about a matter that was "
    "dealt with at the time.",
    "I forward an old mail of a colleague's underneath for context; that one was settled "
    "long ago.",
    "For background I have pasted an older exchange below; it needs nothing from you.",
)

EARLIER_ORDER = (
    "Our previous order, {other}, arrived without any problem.",
    "(This has nothing to do with {other}, our order from last year.)",
    "For reference, {other} was the order before this one and is all settled.",
)

# A customer's follow-up that keeps the thread waiting, some with closing words in them.
FOLLOW_UPS = (
    "Any news on this? It is still affecting us.",
    "Adding a screenshot from this morning, in case it helps.",
    "Could someone call me about this today?",
    "You wrote that this would be resolved by noon; it is not, and we still need your help.",
    "Someone here thought this was done, but it is not. Please do not close this yet.",
    "Is this resolved on your side? Nothing has changed here.",
    "A colleague thought it was sorted, but it isn't; we are still waiting on you.",
    "Our last ticket with you was closed quickly, which we appreciated; this one is still "
    "open for us.",
    "No need to call, but we do still need an answer by email.",
)
SECOND_CHASES = (
    "This is now urgent for us; please reply today.",
    "Still nothing from you, and we are losing time. Please answer today.",
    "I am chasing this again: we need a reply before the end of the day.",
)

# A customer telling us they need nothing more: the thread stops waiting.
CLOSINGS = (
    "Please ignore this one: we sorted it out ourselves, so there is nothing more for you "
    "to do.",
    "We found the cause on our side; you can close this.",
    "All good now, no need to reply.",
    "Resolved, thanks. Please close the ticket.",
    "Our finance team settled it directly, so we need nothing more from you on this.",
    "Scratch my earlier question, I found the answer in the portal. Thanks anyway!",
    "This can be closed: everything works as it should again.",
    "No further action needed from your side; thanks for the quick help.",
    "Never mind, a colleague already took care of it. Consider this done.",
)

# A customer correcting the order number of their first message.
CORRECTIONS = (
    "Sorry, I gave you the wrong order number: it is {new}, not {old}.",
    "Correction to my last mail: the order is {new}. {old} was a typo.",
    "Small correction: I mistyped the number, please use {new} instead of {old}.",
    "Apologies, {old} is an old order of ours. The right one is {new}.",
    "My mistake on the number: it should read {new}, not {old}.",
    "Please note the order is actually {new} (I copied {old} by accident).",
    "Wrong number in my first mail, sorry! {new} is the one, not {old}.",
    "To be precise, this concerns {new}; ignore the {old} I wrote before.",
)

STAFF_REPLIES = (
    "Thanks, we are on it and will update you shortly.",
    "Thank you for letting us know. An engineer is looking at it now.",
    "Thanks for the details; we have opened a case and will come back to you.",
)
STAFF_FIX = "We have made the change on our side; this should be resolved now."
NOT_FIXED = "Unfortunately not: nothing has changed for us, so we still need your help."
OUT_OF_OFFICE = "I am out of the office until Monday and will read your message then."

# A company's mail footer; some carry a category's word (a keyword script reads them).
FOOTERS = (
    "This e-mail and any attachments are confidential and meant for the addressee only. If "
    "you received it in error, please tell the sender and delete it.",
    "Please consider the environment before printing this e-mail. We will never ask you to "
    "change our bank details by e-mail; treat any such request as phishing.",
    "Confidential. If this message reached you by mistake, please let us know and delete "
    "it. Invoices to us must quote a purchase order number.",
    "Registered office: 2 Quay Street. This message may contain privileged information; if "
    "it is not meant for you, do not read, copy or forward it.",
    "Our offices are closed on public holidays. Service outages outside office hours are "
    "announced on our website's status page.",
)

TITLES = ("Office Manager", "Operations Lead", "Practice Manager", "IT Coordinator",
          "Finance Officer", "Head of Administration")


def signature(rng: random.Random, contact: str, company: str, domain: str,
              extra: str = "") -> str:
    """A name, a title, a phone and the company's footer (the same for a domain)."""
    lines = [contact, f"{rng.choice(TITLES)}, {company}",
             f"Phone +44 20 7946 {1000 + sum(contact.encode()) * 37 % 9000}",
             f"www.{domain}"]
    if extra:
        lines.append(extra.format(domain=domain))
    footer = FOOTERS[sum(domain.encode()) % len(FOOTERS)]
    return "\n".join(lines) + "\n--\n" + footer


def quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.splitlines())


def first_body(
    rng: random.Random,
    *,
    category: str,
    order: str,
    contact: str,
    company: str,
    domain: str,
    category_trap: str,
    other: str,
    order_trap: str,
) -> str:
    """A first message stating ``category``'s concern about ``order``; ``category_trap``
    (denial, past, forwarded, signature or none) adds another category's words, and
    ``order_trap`` (earlier, signature, forwarded or none) another order number."""
    misleading = [c for c in CATEGORIES if c != category and c != "request"]
    decoy = rng.choice(misleading)
    context = rng.sample(CONTEXT, 6)
    before, after = context[:3], context[3:]
    concern = rng.choice(CONCERNS[category]).format(order=order)
    details = rng.sample(DETAILS[category], 2)
    if category_trap == "denial":
        (before if rng.random() < 0.5 else after).insert(0, rng.choice(DENIALS[decoy]))
    elif category_trap == "past":
        before.append(rng.choice(PAST[decoy]))
    if order_trap == "earlier":
        before.append(rng.choice(EARLIER_ORDER).format(other=other))
    if "forwarded" in (category_trap, order_trap):
        after.append(rng.choice(FORWARD_NOTES))
    extra = ""
    if category_trap == "signature":
        extra = rng.choice(SIGNATURE_LINES[decoy])
    elif order_trap == "signature":
        extra = f"Customer account {other}"
    body = "\n\n".join(["Hello,", " ".join([*before, concern, *details]), " ".join(after),
                        "Kind regards,", signature(rng, contact, company, domain, extra)])
    if category_trap == "forwarded" or order_trap == "forwarded":
        older = rng.choice(CONCERNS[decoy if category_trap == "forwarded" else category])
        body += ("\n\n---------- Forwarded message ----------\n"
                 f"From: a colleague at {company}\nSubject: an older matter\n\n"
                 + older.format(order=other))
    return body


def reply_body(rng: random.Random, text: str, signer: str, company: str, domain: str,
               previous: str, previous_sender: str, *, staff: bool = False) -> str:
    """A reply: its text, a signature and the previous message quoted below, whole, as mail
    clients quote (only the text above the quote is the reply's own)."""
    if staff:
        own = "\n\n".join(["Hello,", text, "Best regards,",
                           f"{signer}\nSupport team, {company}\nPhone +44 20 7946 0000"])
    else:
        own = "\n\n".join(["Hello,", " ".join([text, *rng.sample(CONTEXT, 3)]),
                           "Kind regards,", signature(rng, signer, company, domain)])
    return f"{own}\n\n{previous_sender} wrote:\n{quote(previous)}"


def own_text(body: str) -> str:
    """A body without the quote below it."""
    lines = body.splitlines()
    for n, line in enumerate(lines):
        if line.endswith(" wrote:") and n + 1 < len(lines) and lines[n + 1].startswith(">"):
            return "\n".join(lines[:n]).rstrip()
    return body


__all__ = [
    "CATEGORIES",
    "CLOSINGS",
    "CONCERNS",
    "CORRECTIONS",
    "FOLLOW_UPS",
    "NOT_FIXED",
    "OUT_OF_OFFICE",
    "SECOND_CHASES",
    "STAFF_FIX",
    "STAFF_REPLIES",
    "first_body",
    "quote",
    "reply_body",
    "signature",
]
