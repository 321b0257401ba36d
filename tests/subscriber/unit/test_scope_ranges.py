"""Which files a fold reads: every file that holds a node a folded scope covers (else the fold
would delete a scope and leave what it covered), and not the files far from every scope."""

from __future__ import annotations

import random

import pytest

from subscriber.store.rows import parent_and_name
from subscriber.store.scope_ranges import FileRanges, covered, files_meeting


def covers(scope: tuple[str, bool], path: str) -> bool:
    root, deep = scope
    if deep and root == "/":
        return True
    return path == root or (deep and path.startswith(root + "/"))


def file(name: str, *paths: str, bookkeeping: bool = False) -> FileRanges:
    """The statistics of a file holding nodes at ``paths`` (and bookkeeping rows, keyed
    "0000...", which sort after every path)."""
    parents = [p for p in (parent_and_name(x)[0] for x in paths) if p is not None]
    keys = ["00000000000000000001"] if bookkeeping else []
    return FileRanges(
        name,
        ("node", "status" if bookkeeping else "node"),
        (min([*paths, *keys]), max([*paths, *keys])),
        (min(parents), max(parents)) if parents else (None, None),
    )


def test_a_deep_scope_meets_its_node_and_subtree_and_not_a_sibling_it_prefixes() -> None:
    where = covered([("/a/b", True)])
    files = [
        file("self", "/a/b"),
        file("below", "/a/b/c/d", "/a/b/z"),
        file("sibling-below", "/a/bc/d"),  # "/a/bc" starts with "/a/b" but is not below it
        file("elsewhere", "/x/y", "/z/z"),
        file("before", "/0/0"),
    ]
    assert files_meeting(files, where) == ["self", "below"]


def test_a_shallow_scope_meets_only_files_that_can_hold_its_node() -> None:
    where = covered([("/a/b", False)])
    files = [
        file("at", "/a/b"),
        file("around", "/a/a", "/a/c"),
        file("child", "/a/b/c"),
        file("far", "/q/r"),
    ]
    assert files_meeting(files, where) == ["at", "around"]


def test_each_range_alone_would_let_a_file_through() -> None:
    # Imported: bookkeeping keys stretch the path range past every path; a laid-out file's
    # folder node stretches the parent range down to its own parent.
    imported = file("imported", "/a/a", "/a/a/x", bookkeeping=True)
    laid_out = file("laid out", "/c", "/c/d", "/c/d/e", "/c/d/f/g")
    where = covered([("/b/q", True), ("/e/x", True)])
    assert where.paths.meet(*imported.paths)
    assert not where.parents.meet(*imported.parents)
    assert where.parents.meet(*laid_out.parents)
    assert not where.paths.meet(*laid_out.paths)
    assert files_meeting([imported, laid_out], where) == []
    assert files_meeting([imported], covered([("/a/a/x", False)])) == ["imported"]


def test_the_root_files_without_statistics_and_files_without_nodes() -> None:
    files = [
        file("far", "/x/y"),
        FileRanges("unknown"),
        FileRanges("half", ("node", "node"), ("/x", None), ("/", "/")),
        FileRanges("bookkeeping only", ("offset", "status"), ("0001", "0009")),
    ]
    assert files_meeting(files, covered([("/", True)])) == ["far", "unknown", "half"]
    assert files_meeting(files, covered([("/a", True)])) == ["unknown", "half"]
    assert files_meeting(files, covered([])) == ["unknown"]
    # The root node has no parent: a shallow scope at the root finds it by its path alone.
    root = FileRanges("root", ("node", "status"), ("/", "0001"), (None, None))
    assert files_meeting([root], covered([("/", False)])) == ["root"]


def test_statistics_truncated_as_delta_truncates_them_keep_the_file() -> None:
    # Delta keeps a prefix of the least value and, for the greatest, a prefix followed by a
    # character above every other: the range is wider than the file's, never narrower.
    page = "/content/site/en/products-and-solutions-03/category-04/page-000123-article"
    parent = page.rpartition("/")[0]
    truncated = [
        FileRanges(
            "f",
            ("node", "node"),
            (page[:32], page[:32] + "\U0010ffff"),
            (parent[:32], parent[:32] + "\U0010ffff"),
        )
    ]
    assert files_meeting(truncated, covered([(page, True)])) == ["f"]
    assert files_meeting(truncated, covered([(page, False)])) == ["f"]


@pytest.mark.parametrize("seed", range(30))
def test_every_file_holding_a_covered_node_is_read(seed: int) -> None:
    rng = random.Random(seed)
    names = ["a", "ab", "b", "b-c", "c", "a.b", "é", "z"]

    def path() -> str:
        return "/" + "/".join(rng.choice(names) for _ in range(rng.randint(1, 4)))

    paths = sorted({path() for _ in range(60)})
    # Files: sorted chunks (a laid-out store) and random handfuls (appends, compactions).
    files: list[tuple[str, list[str]]] = []
    for i in range(0, len(paths), 7):
        files.append((f"sorted-{i}", paths[i : i + 7]))
    for i in range(8):
        files.append((f"random-{i}", rng.sample(paths, rng.randint(1, 6))))
    scopes = [(rng.choice(paths), rng.random() < 0.6) for _ in range(rng.randint(1, 8))]
    stats = [file(n, *p, bookkeeping=rng.random() < 0.5) for n, p in files]
    chosen = files_meeting(stats, covered(scopes))
    holding = [n for n, p in files if any(covers(s, x) for s in scopes for x in p)]
    assert set(holding) <= set(chosen)
    # And a file of nodes far from every scope is left out.
    assert files_meeting([file("far", "/0/0", "/0/1")], covered(scopes)) == []
