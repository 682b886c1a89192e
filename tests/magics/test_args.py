"""Arguments of the companion magics: parsed by IPython's @magic_arguments, errors show the usage."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments

from agent_kernel.magics.args import parse_args, unquote


@magic_arguments()
@argument("n", nargs="?", type=int, metavar="N")
@argument("--name", metavar="NAME")
def example(line: str = "") -> None:
    """An example magic."""


def test_parse_args_reads_the_declared_arguments():
    args = parse_args(example, "--name 'two words' 3")
    assert (args.n, unquote(args.name)) == (3, "two words")
    assert parse_args(example, "").n is None


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("x", "argument N: invalid int value: 'x'. Usage: %example [--name NAME] [N]"),
        ("--name", "argument --name: expected one argument. Usage: %example [--name NAME] [N]"),
        ("1 2", "unrecognized arguments: 2. Usage: %example [--name NAME] [N]"),
    ],
)
def test_a_bad_line_is_a_usage_error_with_the_usage(line, message):
    with pytest.raises(UsageError) as raised:
        parse_args(example, line)
    assert str(raised.value) == message


def test_unquote():
    assert [unquote(v) for v in ("'a b'", '"a"', "a'", "'", "plain")] == ["a b", "a", "a'", "'", "plain"]
