"""The demo's sample site, its export comparison and what it prints (the full demo runs in
tests/e2e)."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from pathlib import Path

from runtime.progress import LiveLines
from scd.demo import BULK_FILE_BYTES, BULK_FILES, compare_trees, make_sample_site
from scd.demo_output import QueueTable, Story


def test_sample_site_is_deterministic(tmp_path: Path) -> None:
    one = make_sample_site(tmp_path / "one")
    two = make_sample_site(tmp_path / "two")
    assert compare_trees(one, two) == []
    bulk = list((one / "assets" / "bulk").iterdir())
    assert len(bulk) == BULK_FILES
    assert all(p.stat().st_size == BULK_FILE_BYTES for p in bulk)


def test_compare_trees_finds_every_kind_of_difference(tmp_path: Path) -> None:
    source = make_sample_site(tmp_path / "source")
    copy = tmp_path / "copy"
    shutil.copytree(source, copy)
    (copy / "index.html.props.json").write_text("{}")  # export sidecars are not differences
    assert compare_trees(source, copy) == []
    (copy / "about.html").write_text("changed")
    (copy / "css" / "site.css").unlink()
    (copy / "docs" / "extra.md").write_text("new")
    found = compare_trees(source, copy)
    assert any("content differs" in p and "about.html" in p for p in found)
    assert any("missing in export" in p and "site.css" in p for p in found)
    assert any("not in source" in p and "extra.md" in p for p in found)


def test_each_distribute_is_one_line_with_action_paths_offset_and_where_it_went() -> None:
    out = io.StringIO()
    story = Story(out)
    story.distributed(
        {"action": "ADD", "deepPaths": ["/css", "/docs", "/images", "/more"]},
        {"offset": 1, "size": 787, "spilled": False, "binariesReferenced": 1},
    )
    story.distributed(
        {"action": "ADD", "paths": ["/a"], "deepPaths": ["/assets"]},
        {"offset": 12, "size": 987_000, "spilled": True, "binariesReferenced": 0},
    )
    first, second = (" ".join(line.split()) for line in out.getvalue().splitlines())
    assert first == "ADD /css /docs /images +1 (deep) offset 1 787 B inline, 1 binary by reference"
    assert second == "ADD /a /assets (1 deep) offset 12 963.9 KiB spilled to the blob store"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_live_lines_redraw_in_place_on_a_terminal_and_print_once_elsewhere() -> None:
    piped = io.StringIO()
    lines = LiveLines(piped)
    lines.update(["a 1/3", "b 0/3"])
    lines.update(["a 3/3", "b 3/3"])
    assert piped.getvalue() == ""
    lines.close()
    assert piped.getvalue() == "a 3/3\nb 3/3\n"  # the outcome, no escape sequences

    terminal = Terminal()
    lines = LiveLines(terminal)
    lines.update(["a 1/3", "b 0/3"])
    lines.update(["a 3/3"])
    # The second drawing moves up over the first, rewrites it and erases the stale line.
    assert terminal.getvalue() == (
        "\x1b[2Ka 1/3\n\x1b[2Kb 0/3\n" + "\x1b[2F" + "\x1b[2Ka 3/3\n\x1b[2K\n"
    )


def test_queue_table_shows_progress_per_subscriber() -> None:
    out = io.StringIO()
    table = QueueTable(Story(out))
    table.show([("subscriber-1", "RUNNING", 2, 6), ("subscriber-2", "IDLE", 6, 6)])
    table.close()
    one, two = out.getvalue().splitlines()
    assert one.split()[:2] == ["subscriber-1", "RUNNING"]
    assert one.endswith("2/6 packages")
    assert "[" + "#" * 20 + "]" in two


def test_logs_go_to_the_file_while_the_story_stays_on_stdout(tmp_path: Path) -> None:
    """File descriptor 2 itself is redirected: what a child process (Spark's JVM) writes to
    its inherited standard error lands in the log too."""
    script = (
        "import subprocess, sys\n"
        "from pathlib import Path\n"
        "from scd.demo_output import logs_to\n"
        "with logs_to(Path(sys.argv[1])):\n"
        "    print('story')\n"
        "    print('python log', file=sys.stderr)\n"
        "    subprocess.run(['sh', '-c', 'echo jvm log >&2'], check=True)\n"
        "print('after', file=sys.stderr)\n"
    )
    log = tmp_path / "demo.log"
    run = subprocess.run(
        [sys.executable, "-c", script, str(log)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert run.stdout == "story\n"
    assert run.stderr == "after\n"
    assert log.read_text().splitlines() == ["python log", "jvm log"]
