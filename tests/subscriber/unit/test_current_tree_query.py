"""docs/content-store.md documents the query that gives a store's current tree: it is the store's
own."""

from __future__ import annotations

import re
from pathlib import Path

from subscriber.store.current_tree import current_nodes_sql

README = Path(__file__).resolve().parents[3] / "docs" / "content-store.md"


def test_the_readme_query_is_the_one_the_store_runs() -> None:
    blocks = re.findall(r"```sql\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    documented = [b.strip() for b in blocks if "kind = 'scope'" in b]
    assert documented == [
        current_nodes_sql("delta.`/var/scd/store`", "startswith(path, '/site/')") + ";"
    ]
