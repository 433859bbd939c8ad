"""`learning-bot completion bash|zsh|fish`: shell completion scripts generated from the
argument parser itself (its commands, options, their choices, and the chat commands' words),
so they never drift from it; no dependency. Arm ids and labels complete too, where that is
cheap: `learning-bot completion --arms` prints them from a SQLite database through the
standard-library reader (nothing for another database)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from learning_bot.adapters.terminal.commands import EXIT_OK, EXIT_USAGE, CliError
from learning_bot.cli.chat import terminal_commands
from learning_bot.cli.parser import Command

if TYPE_CHECKING:
    from learning_bot.settings import Settings

SHELLS = ("bash", "zsh", "fish")


def chat_words() -> dict[str, tuple[str, ...]]:
    """The words each chat command takes after its name, as its registry entry declares them
    (help: the terminal's commands)."""
    commands = terminal_commands()
    words = {spec.name: spec.words for spec in commands if spec.words}
    words["help"] = tuple(spec.name for spec in commands)
    return words


def arms_where() -> dict[str, str]:
    """Where an arm id or label goes: after the word `arm`, as the first word, or anywhere."""
    return {spec.name: spec.arms for spec in terminal_commands() if spec.arms}


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", nargs="?", choices=SHELLS, help="the shell")
    parser.add_argument(
        "--arms",
        action="store_true",
        help="print the learner's arm ids and labels, one a line (what the scripts call)",
    )


def _run(args: argparse.Namespace, settings: Settings) -> int:
    if args.arms:
        for name in arm_names(settings):
            print(name)
        return EXIT_OK
    if args.shell is None:
        raise CliError("completion needs a shell", EXIT_USAGE, hint="one of: bash, zsh, fish")
    spec = CommandLine.of(args.root_parser)
    print({"bash": bash_script, "zsh": zsh_script, "fish": fish_script}[args.shell](spec))
    return EXIT_OK


COMMAND = Command(
    name="completion",
    help="print a shell completion script (bash, zsh or fish)",
    description=(
        "Print a completion script for your shell, generated from this command line: "
        "`source <(learning-bot completion bash)` in ~/.bashrc; "
        "`source <(learning-bot completion zsh)` in ~/.zshrc; "
        "`learning-bot completion fish > ~/.config/fish/completions/learning-bot.fish`. "
        "Arm ids and labels complete from a SQLite database."
    ),
    arguments=_arguments,
    run=_run,
    no_url="it prints a script",
)


def arm_names(settings: Settings) -> list[str]:
    """The learner's arm ids and labels, from a SQLite file through the light reader; none
    for another database or a file not there (a completion must stay quick and quiet)."""
    from learning_bot.app import build_read_app
    from learning_bot.bot.commands import ArmNamesQuery
    from learning_bot.bot.invocation import Invocation

    app = build_read_app(settings)
    if app is None:
        return []
    try:
        from learning_bot.adapters.terminal.commands import local_actor

        reply = app.bus.dispatch(Invocation("terminal", local_actor(), ArmNamesQuery()))
    finally:
        app.close()
    names: list[str] = []
    for arm_id, label in reply.arm_names or ():
        names.append(arm_id)
        if label and label not in names:
            names.append(label)
    return names


@dataclass
class ScriptCommand:
    """One command as the scripts complete it."""

    name: str
    summary: str
    options: list[str] = field(default_factory=list)
    words: list[str] = field(default_factory=list)
    """Words it takes after its name: its positional choices, its subcommands, chat words."""
    arms: str = ""
    """Where arm ids complete (arms_where), if anywhere."""


@dataclass
class CommandLine:
    """What the parser says, for the scripts: the global options, the options that take a
    value (with their choices, if any), and each command."""

    options: list[str]
    valued: dict[str, list[str]]
    files: list[str]
    commands: list[ScriptCommand]

    @classmethod
    def of(cls, parser: argparse.ArgumentParser) -> CommandLine:
        valued: dict[str, list[str]] = {}
        commands: list[ScriptCommand] = []
        subparsers = _subparsers(parser)
        options = _options(parser, valued)
        if subparsers is not None:
            words, arms = chat_words(), arms_where()
            summaries = {a.dest: a.help or "" for a in subparsers._choices_actions}
            for name, child in subparsers.choices.items():
                command = ScriptCommand(name, summaries.get(name, ""), _options(child, valued))
                for action in child._actions:
                    if isinstance(action, argparse._SubParsersAction):
                        command.words.extend(action.choices)
                        for grandchild in action.choices.values():
                            _options(grandchild, valued, command.options)
                    elif not action.option_strings and action.choices:
                        command.words.extend(str(c) for c in action.choices)
                command.words.extend(words.get(name, ()))
                command.arms = arms.get(name, "")
                commands.append(command)
        files = [o for o in valued if o == "--config"]
        return cls(options, valued, files, commands)


def _subparsers(
    parser: argparse.ArgumentParser,
) -> argparse._SubParsersAction[argparse.ArgumentParser] | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _options(
    parser: argparse.ArgumentParser,
    valued: dict[str, list[str]],
    into: list[str] | None = None,
) -> list[str]:
    """The long options of `parser` (added to `into`), noting in `valued` those that take a
    value, with their choices."""
    found = [] if into is None else into
    for action in parser._actions:
        for option in action.option_strings:
            if not option.startswith("--"):
                continue
            if option not in found:
                found.append(option)
            if action.nargs != 0:
                valued[option] = [str(c) for c in action.choices or ()]
    return found


def _words(items: list[str]) -> str:
    return " ".join(items)


def _case_arms(spec: CommandLine) -> str:
    """The shell `case` arms (shared by bash and zsh) that set opts, words and arms."""
    lines = []
    for c in spec.commands:
        lines.append(
            f'        {c.name}) opts="{_words(c.options)}"; words="{_words(c.words)}"; '
            f'arms="{c.arms}" ;;'
        )
    return "\n".join(lines)


def _valued_cases(spec: CommandLine, reply: str, files: str) -> str:
    lines = []
    for option in spec.files:
        lines.append(f"        {option}) {files}; return ;;")
    for option, choices in spec.valued.items():
        if option in spec.files:
            continue
        lines.append(f"        {option}) {reply.format(words=_words(choices))}; return ;;")
    return "\n".join(lines)


def _word_case(valued: str, count: str) -> str:
    """The shell `case` (shared by bash and zsh) that reads one word `w` before the cursor:
    options pass, one that takes a value (`valued`) skips the next word, the first other word
    is the command and the later ones are counted (`count`, in the shell's own arithmetic)."""
    return f"""        case "$w" in
            --*=*) ;;
            {valued}) skip=1 ;;
            -*) ;;
            *) if [[ -z "$cmd" ]]; then cmd="$w"; else {count}; fi ;;
        esac"""


def _arms_case(words: str) -> str:
    """The shell `case` (shared by bash and zsh) that sets `want` where arm ids complete (the
    command's `arms`), emptying the variable `words` after the word `arm`."""
    return f"""    case "$arms" in
        any) want=1 ;;
        first) ((n == 0)) && want=1 ;;
        after-arm) [[ "$prev" == arm ]] && want=1 && {words}="" ;;
    esac"""


def bash_script(spec: CommandLine) -> str:
    """The bash script: `_learning_bot` for `complete -F` (also runs from COMP_WORDS and
    COMP_CWORD alone, without COMP_LINE)."""
    valued = "|".join(spec.valued)
    commands = _words([c.name for c in spec.commands])
    valued_cases = _valued_cases(
        spec, 'COMPREPLY=($(compgen -W "{words}" -- "$cur"))', 'COMPREPLY=($(compgen -f -- "$cur"))'
    )
    return f"""# learning-bot completion for bash, generated from its argument parser by
# `learning-bot completion bash`. Load it with: source <(learning-bot completion bash)
_learning_bot_arms() {{
    local -a global=()
    local i
    for ((i = 1; i < ${{#_lb_words[@]}}; i++)); do
        case "${{_lb_words[i]}}" in
            --database-url|--learner|--config)
                global+=("${{_lb_words[i]}}" "${{_lb_words[i+1]}}") ;;
        esac
    done
    "${{_lb_words[0]:-learning-bot}}" "${{global[@]}}" completion --arms 2>/dev/null
}}

_learning_bot() {{
    local line
    if [[ -n "${{COMP_LINE-}}" ]]; then
        line="${{COMP_LINE:0:${{COMP_POINT:-${{#COMP_LINE}}}}}}"
    else
        line="${{COMP_WORDS[*]:0:COMP_CWORD+1}}"
    fi
    local -a _lb_words
    read -ra _lb_words <<< "$line"
    local cur=""
    if [[ "$line" != *" " && ${{#_lb_words[@]}} -gt 0 ]]; then
        cur="${{_lb_words[${{#_lb_words[@]}}-1]}}"
        unset "_lb_words[${{#_lb_words[@]}}-1]"
    fi
    local prev="" cmd="" i w n=0 skip=0 after_arm=0
    for ((i = 1; i < ${{#_lb_words[@]}}; i++)); do
        w="${{_lb_words[i]}}"
        if ((skip)); then skip=0; continue; fi
{_word_case(valued, "n=$((n + 1))")}
    done
    ((${{#_lb_words[@]}} > 1)) && prev="${{_lb_words[${{#_lb_words[@]}}-1]}}"
    COMPREPLY=()
    case "$prev" in
{valued_cases}
    esac
    if [[ -z "$cmd" ]]; then
        if [[ "$cur" == -* ]]; then
            COMPREPLY=($(compgen -W "{_words(spec.options)}" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "{commands}" -- "$cur"))
        fi
        return 0
    fi
    local opts="" words="" arms=""
    case "$cmd" in
{_case_arms(spec)}
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$opts {_words(spec.options)}" -- "$cur"))
        return 0
    fi
    local want=0
{_arms_case("words")}
    if ((want)); then
        local IFS=$'\\n'
        COMPREPLY=($(compgen -W "$(_learning_bot_arms)"$'\\n'"${{words// /$'\\n'}}" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
    fi
    # bash splits words at ':' (arm ids have two): answer only what follows the last one
    if [[ "$cur" == *:* && "${{COMP_WORDBREAKS-:}}" == *:* ]]; then
        local head="${{cur%"${{cur##*:}}"}}"
        for i in "${{!COMPREPLY[@]}}"; do COMPREPLY[i]="${{COMPREPLY[i]#"$head"}}"; done
    fi
    return 0
}}
complete -o default -F _learning_bot learning-bot"""


def zsh_script(spec: CommandLine) -> str:
    """The zsh script (compsys: `compdef`)."""
    valued = "|".join(spec.valued)
    commands = _words([c.name for c in spec.commands])
    return f"""#compdef learning-bot
# learning-bot completion for zsh, generated from its argument parser by
# `learning-bot completion zsh`. Load it with: source <(learning-bot completion zsh)
# (after compinit).
_learning_bot() {{
    local cur="${{words[CURRENT]}}" prev="${{words[CURRENT-1]}}" cmd="" w
    local -i n=0 skip=0
    local -a global
    for w in "${{(@)words[2,CURRENT-1]}}"; do
        if (( skip )); then skip=0; continue; fi
{_word_case(valued, "n+=1")}
    done
    for ((w = 2; w < CURRENT; w++)); do
        case "${{words[w]}}" in
            --database-url|--learner|--config) global+=("${{words[w]}}" "${{words[w+1]}}") ;;
        esac
    done
    case "$prev" in
{_valued_cases(spec, "compadd -- {words}", "_files")}
    esac
    if [[ -z "$cmd" ]]; then
        if [[ "$cur" == -* ]]; then compadd -- {_words(spec.options)}
        else compadd -- {commands}; fi
        return
    fi
    local opts="" words_="" arms=""
    case "$cmd" in
{_case_arms(spec).replace('words="', 'words_="')}
    esac
    if [[ "$cur" == -* ]]; then
        compadd -- ${{=opts}} {_words(spec.options)}
        return
    fi
    local -i want=0
{_arms_case("words_")}
    if ((want)); then
        compadd -- ${{(f)"$(${{words[1]}} $global completion --arms 2>/dev/null)"}}
    fi
    compadd -- ${{=words_}}
}}
compdef _learning_bot learning-bot"""


def fish_script(spec: CommandLine) -> str:
    """The fish script: one `complete` line per command, option and word."""
    names = _words([c.name for c in spec.commands])
    out = [
        "# learning-bot completion for fish, generated from its argument parser by",
        "# `learning-bot completion fish`. Install it with:",
        "# learning-bot completion fish > ~/.config/fish/completions/learning-bot.fish",
        "complete -c learning-bot -f",
        "function __learning_bot_arms",
        "    learning-bot completion --arms 2>/dev/null",
        "end",
    ]
    for option in spec.options:
        out.append(f"complete -c learning-bot -l {option[2:]}{_fish_value(spec, option)}")
    for c in spec.commands:
        summary = c.summary.replace("'", "\\'")
        out.append(
            f"complete -c learning-bot -n 'not __fish_seen_subcommand_from {names}' "
            f"-a {c.name} -d '{summary[:80]}'"
        )
        seen = f"-n '__fish_seen_subcommand_from {c.name}'"
        for option in c.options:
            if option in spec.options:
                continue
            out.append(
                f"complete -c learning-bot {seen} -l {option[2:]}{_fish_value(spec, option)}"
            )
        if c.words:
            out.append(f"complete -c learning-bot {seen} -a '{_words(c.words)}'")
        if c.arms:
            out.append(f"complete -c learning-bot {seen} -a '(__learning_bot_arms)'")
    return "\n".join(out)


def _fish_value(spec: CommandLine, option: str) -> str:
    if option not in spec.valued:
        return ""
    if option in spec.files:
        return " -r -F"
    choices = spec.valued[option]
    return f" -x -a '{_words(choices)}'" if choices else " -x"
