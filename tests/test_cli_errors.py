"""The CLI's last line of defence: a bug anywhere becomes one `porter: internal error:` line naming
the command and its file, exit 3 (the traceback with --debug); a PorterError stays one line even
when the file puts newlines, escape sequences or megabytes into the names it quotes.

A bug cannot be asked for through a real input (each one found is fixed), so these tests make
one: the frontend's entry point raises where it would have read the file.
"""

import pytest
from click.testing import CliRunner

from porter import cli
from porter.errors import PorterError


def _run(monkeypatch, failure: Exception, *args: str):
    def broken(path):
        raise failure

    monkeypatch.setattr("porter.frontends.inspect.load_graph", broken)
    return CliRunner().invoke(cli.main, list(args))


def test_an_unexpected_exception_is_one_line_with_exit_3(monkeypatch, tmp_path):
    model = tmp_path / "model.tflite"
    result = _run(monkeypatch, KeyError("scale"), "inspect", str(model))
    assert result.exit_code == cli.INTERNAL_ERROR_EXIT
    assert result.stderr.splitlines() == [
        f"porter: internal error: porter inspect {model}: KeyError: 'scale' (a bug in porter; --debug shows the traceback)"]


def test_debug_shows_the_traceback(monkeypatch, tmp_path):
    result = _run(monkeypatch, ZeroDivisionError("integer modulo by zero"), "--debug", "inspect", str(tmp_path / "m.onnx"))
    assert result.exit_code == cli.INTERNAL_ERROR_EXIT
    lines = result.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert "ZeroDivisionError: integer modulo by zero" in lines
    assert lines[-1].startswith("porter: internal error: porter inspect ") and lines[-1].endswith("(a bug in porter)")


def test_file_contents_in_a_message_stay_on_one_line(monkeypatch, tmp_path):
    result = _run(monkeypatch, PorterError("tensor 3 'evil\nname\x1b[31m' is sparse"), "inspect", str(tmp_path / "m.tflite"))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["porter: error: tensor 3 'evil\\x0aname\\x1b[31m' is sparse"]


def test_a_huge_message_keeps_its_start_and_end(monkeypatch, tmp_path):
    result = _run(monkeypatch, PorterError("node 1 '" + "x" * 100_000 + "' (Add): input 0 is omitted"), "inspect",
                  str(tmp_path / "m.onnx"))
    (line,) = result.stderr.splitlines()
    assert len(line) < 2 * cli.LINE_LIMIT
    assert line.startswith("porter: error: node 1 'xxx") and line.endswith("' (Add): input 0 is omitted")
    assert "characters left out" in line


@pytest.mark.parametrize("args", [["--version"], ["inspect", "--help"], ["inspect"]])
def test_click_usage_and_exits_pass_through(args):
    result = CliRunner().invoke(cli.main, args)
    assert "internal error" not in result.output + result.stderr
    assert result.exit_code in (0, 2)
