"""The ``shell-patch`` harness: a Codex/Claude-Code-style interface, a shell and a patch tool.

What the model sees is not the episode's toolbox but the interface coding agents of that
kind are trained on (the prompt and schemas are this project's own words):

- ``shell`` runs one command, given as an argument vector (``["bash", "-lc", "..."]`` for
  shell syntax), in the workdir or a ``workdir`` under it, with an optional ``timeout_ms``;
  the result is the exit status and the output.
- ``apply_patch`` takes one patch in the V4A envelope (``*** Begin Patch`` … ``*** End
  Patch``: Add File, Update File with ``@@`` context hunks, Delete File; see
  ``patching``). A call to ``shell`` whose argv is ``["apply_patch", PATCH]`` (or a bash
  script ``apply_patch <<'EOF' … EOF``) is a patch too, as Codex treats it.
- ``ask_user`` is the episode's own (the question reaches the user simulator).
- The turn ends as a Codex turn does: a reply without tool calls is the agent's answer to
  the user (``Episode.end_turn``); there is no ``finish`` tool. A later user turn arrives as
  a user message in the same conversation.

How it maps onto the episode (the loop is the built-in chat-completions one,
``tool_calling.drive``, with this interface):

- a ``shell`` call becomes the episode's ``shell`` tool (a bash command in the agent's
  bubblewrap sandbox, which mounts the workspace and nothing else); its answer is the
  episode's, unchanged;
- an ``apply_patch`` call is parsed here first: a patch that does not parse, or names a
  path outside the workdir, is refused (``Episode.reject``: recorded, counted as
  malformed) before anything runs. A patch that parses runs as one episode ``shell`` call,
  ``python3 -c <patching.py> WORKDIR <patch, base64>``, so it is applied *inside the
  sandbox* with the sandbox's view of the workspace (symlinks out of the workdir and
  read-only parts refused there); it applies whole or not at all, and the answer is the
  applier's one message (what changed, or why nothing did);
- arguments that do not fit a schema, or a tool this interface lacks, are refused with an
  error that says what the interface expects.

The trajectory records the model's own calls (``shell`` with argv, ``apply_patch`` with its
patch) and the episode's answers; the packages' ``read_file``/``write_file``/``edit_file``/
``list_files`` tools are not offered (files are read with the shell and written with
patches or the shell). A package without the ``shell`` tool cannot run under this harness.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import patching
from .harness import AGENT_LANE_MARKER, ASK_USER_TOOL, Episode, HarnessError, PolicyConfig, register
from .tool_calling import client_for, drive
from .trajectory import ToolCall

NAME = "shell-patch"
SHELL_TOOL, PATCH_TOOL = "shell", "apply_patch"
# the applier runs as ``python3 -c SOURCE``: its source, read once
APPLIER = Path(patching.__file__).read_text(encoding="utf-8")
# one ``bash -c`` argument holds the applier and the patch (base64): Linux takes 128 KiB
MAX_PATCH_CHARS = 80_000
MAX_TIMEOUT_MS = 600_000
SHELLS = ("bash", "sh")
HEREDOC = re.compile(r"^\s*apply_patch\s+<<-?\s*(['\"]?)(\w+)\1[ \t]*\n(.*)\n\2\s*$", re.S)


class ShellArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    command: list[str] = Field(min_length=1)
    workdir: str | None = None
    timeout_ms: int | None = Field(None, gt=0)


class PatchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input: str


def system_prompt(workdir: str) -> str:
    """The harness's system prompt: who the agent is, the two tools, the patch format, and
    how a turn ends. The first words are the episode's (``AGENT_LANE_MARKER``)."""
    return f"""{AGENT_LANE_MARKER}: a coding agent working in a terminal on a user's files. \
The workspace is {workdir}; there is no network.

You act with tools:
- `shell` runs one command and returns its exit status and output. Give the command as an \
argument vector, e.g. ["ls", "-la"]; for pipes, redirection or several commands use \
["bash", "-lc", "<script>"]. It runs in {workdir} (or `workdir`). Read files with it, run \
programs with it (python3 with openpyxl and python-docx is installed), and produce binary \
files (spreadsheets, documents) with it.
- `apply_patch` creates, changes and deletes text files. Its `input` is one patch:

*** Begin Patch
*** Add File: notes/todo.txt
+first line of the new file
+second line
*** Update File: src/report.py
@@ def total(rows):
     values = [r.amount for r in rows]
-    return sum(values)
+    return round(sum(values), 2)
*** Delete File: old.txt
*** End Patch

  Paths are relative to {workdir}. Every line of an added file starts with "+". In an \
Update File section each change is a hunk: lines starting with " " are unchanged context \
(about three lines before and after the change, copied exactly from the file), "-" lines \
are removed, "+" lines are added. "@@" starts a hunk and may name a line above the change \
(a def or a heading) to find the right place; "*** Move to: <path>" right after the Update \
File line renames the file; "*** End of File" after a hunk pins it to the end of the file. \
A patch applies whole or not at all: when it does not apply, the result says why and no \
file changed.
- `{ASK_USER_TOOL}` asks the user when something essential is unclear; their answer is the \
result. They know their own situation, not everything.

When you have done what the user asked, reply with a short message to the user and no tool \
call: that ends your turn. The user may then come back with a follow-up request; handle it \
the same way."""


def tool_specs(episode: Episode) -> list[dict[str, Any]]:
    """``shell`` and ``apply_patch`` in this interface's own schemas, and the episode's
    ``ask_user``. The shell's description keeps the episode's sandbox facts (what persists
    between calls)."""
    specs = {s["function"]["name"]: s for s in episode.tool_schemas()}
    if SHELL_TOOL not in specs:
        offered = ", ".join(specs)
        raise HarnessError(
            "harness_crash",
            f"the {NAME} harness needs the package's shell tool; it offers: {offered}",
        )
    described = str(specs[SHELL_TOOL]["function"].get("description", ""))
    facts = described[described.find("Each call") :] if "Each call" in described else ""
    shell = _function(
        SHELL_TOOL,
        "Runs a command in the workspace and returns its exit status, stdout and stderr. " + facts,
        {
            "command": {
                "type": "array",
                "items": {"type": "string"},
                "description": 'the argument vector, e.g. ["bash", "-lc", "ls | head"]',
            },
            "workdir": {
                "type": "string",
                "description": f"directory to run in (default {episode.workdir})",
            },
            "timeout_ms": {
                "type": "integer",
                "description": f"milliseconds before it is killed (at most {MAX_TIMEOUT_MS})",
            },
        },
        ["command"],
    )
    patch = _function(
        PATCH_TOOL,
        "Applies one patch (*** Begin Patch … *** End Patch) to the workspace's text files.",
        {"input": {"type": "string", "description": "the whole patch"}},
        ["input"],
    )
    return [shell, patch, specs[ASK_USER_TOOL]]


def _function(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    parameters = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    function = {"name": name, "description": description.strip(), "parameters": parameters}
    return {"type": "function", "function": function}


@register(NAME)
class ShellPatchHarness:
    name = NAME

    def run(self, episode: Episode, policy: PolicyConfig) -> None:
        if not policy.base_url:
            raise HarnessError("model_error", f"the {NAME} harness needs a model endpoint")
        tools = tool_specs(episode)
        with client_for(policy) as client:
            drive(
                client,
                episode,
                policy,
                system=system_prompt(episode.workdir),
                tools=tools,
                dispatch=lambda call: dispatch(episode, call),
            )


# ---- one call ------------------------------------------------------------------------------
def dispatch(episode: Episode, call: ToolCall) -> str:
    """The answer to one of the model's calls, after the episode ran (or refused) it."""
    if call.name == ASK_USER_TOOL:
        return episode.execute(call).text
    if call.name not in (SHELL_TOOL, PATCH_TOOL):
        tools = ", ".join((SHELL_TOOL, PATCH_TOOL, ASK_USER_TOOL))
        return episode.reject(
            call, f"error: unknown tool {call.name!r}; the tools are: {tools}"
        ).text
    try:
        raw = json.loads(call.arguments or "{}")
    except ValueError as exc:
        error = f"error: the arguments of {call.name} are not valid JSON ({exc})"
        return episode.reject(call, error).text
    try:
        if call.name == PATCH_TOOL:
            return _patch(episode, call, PatchArgs.model_validate(raw).input)
        args = ShellArgs.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
            for e in exc.errors()
        )
        hint = ' (command is an argument vector: ["bash", "-lc", "..."])'
        more = hint if call.name == SHELL_TOOL else ""
        return episode.reject(call, f"error: bad arguments for {call.name}: {problems}{more}").text
    if (patch := patch_in(args.command)) is not None:
        return _patch(episode, call, patch)
    return _shell(episode, call, args)


def patch_in(argv: list[str]) -> str | None:
    """The patch when a shell call is really ``apply_patch`` (argv ``["apply_patch", P]``,
    or a shell script ``apply_patch <<'EOF' … EOF``), else None."""
    if argv[0] == PATCH_TOOL and len(argv) == 2:
        return argv[1]
    if len(argv) == 3 and argv[0] in SHELLS and argv[1] in ("-c", "-lc"):
        found = HEREDOC.match(argv[2])
        if found is not None:
            return found.group(3)
    return None


def shell_command(args: ShellArgs, workdir: str) -> str:
    """The bash command line the episode's shell runs for an argument vector."""
    argv = args.command
    if len(argv) == 3 and argv[0] in SHELLS and argv[1] in ("-c", "-lc"):
        command = argv[2]  # the episode's shell is already bash -c
    else:
        command = shlex.join(argv)
    if args.workdir and args.workdir not in (".", workdir):
        command = f"cd -- {shlex.quote(args.workdir)} || exit 1\n{command}"
    return command


def _shell(episode: Episode, call: ToolCall, args: ShellArgs) -> str:
    arguments: dict[str, Any] = {"command": shell_command(args, episode.workdir)}
    if args.timeout_ms is not None:
        arguments["timeout_s"] = min(args.timeout_ms, MAX_TIMEOUT_MS) / 1000
    return episode.execute(
        ToolCall(id=call.id, name=SHELL_TOOL, arguments=json.dumps(arguments))
    ).text


def _patch(episode: Episode, call: ToolCall, patch: str) -> str:
    """Refuse a malformed patch here; apply one that parses inside the sandbox."""
    if len(patch) > MAX_PATCH_CHARS:
        error = (
            f"{patching.NOT_APPLIED} the patch has {len(patch)} characters (at most "
            f"{MAX_PATCH_CHARS}); split it into several apply_patch calls"
        )
        return episode.reject(call, error).text
    try:
        patching.check_paths(patching.parse(patch), episode.workdir)
    except patching.PatchError as exc:
        return episode.reject(call, f"{patching.NOT_APPLIED} {exc}").text
    encoded = base64.b64encode(patch.encode("utf-8")).decode("ascii")
    command = f"python3 -c {shlex.quote(APPLIER)} {shlex.quote(episode.workdir)} {encoded}"
    arguments = json.dumps({"command": command, "timeout_s": 60})
    output = episode.execute(ToolCall(id=call.id, name=SHELL_TOOL, arguments=arguments)).text
    return applier_message(output)


def applier_message(output: str) -> str:
    """The applier's own message out of the episode's shell answer (``exit N``, then its
    stdout); anything else (python3 missing, a timeout) is passed on whole."""
    found = re.fullmatch(r"exit [01]\n--- stdout ---\n(.*?)\n?", output, re.S)
    if found is None or "\n--- stderr ---\n" in output:
        return output
    return found.group(1)


__all__ = [
    "MAX_PATCH_CHARS",
    "NAME",
    "ShellPatchHarness",
    "applier_message",
    "dispatch",
    "patch_in",
    "shell_command",
    "system_prompt",
    "tool_specs",
]
