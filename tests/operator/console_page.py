"""The console page as a test reads and drives it through selenium: tables are read in one
script call each (no stale elements while the page redraws every second)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.waiting import wait_for

# The page polls every second; anything it shows arrives well within this once true on the
# server (Spark imports are waited for separately, with their own timeouts).
PAGE_WAIT_S = 30.0
QUEUE_COLUMNS = (
    "subscriber",
    "state",
    "size",
    "head",
    "lag",
    "retries",
    "error",
    "errors",
    "editable",
)

_ROWS = """
return [...document.querySelectorAll(arguments[0] + ' tbody tr[data-' + arguments[1] + ']')]
  .map(r => [r.getAttribute('data-' + arguments[1]), [...r.cells].map(c => c.textContent)]);
"""


class ConsolePage:
    def __init__(self, driver: Any, url: str, shots: Path) -> None:
        self.driver = driver
        self.url = url
        self.shots = shots
        shots.mkdir(parents=True, exist_ok=True)

    def open(self) -> None:
        self.driver.get(f"{self.url}/console")

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def _rows(self, table: str, key: str) -> list[tuple[str, list[str]]]:
        rows: list[tuple[str, list[str]]] = self.js(_ROWS, table, key)
        return rows

    def queues(self) -> dict[str, dict[str, str]]:
        """Queue name -> column -> text, of the rows on the current page of the table."""
        return {
            name: dict(zip(QUEUE_COLUMNS, cells, strict=True))
            for name, cells in self._rows("#queues", "queue")
        }

    def packages(self) -> dict[int, list[str]]:
        return {int(offset): cells for offset, cells in self._rows("#packages", "offset")}

    def events(self) -> list[int]:
        return [int(offset) for offset, _ in self._rows("#events", "offset")]

    def failures(self, offset: int) -> list[list[str]]:
        """The failure events' rows of the package at ``offset``, newest first."""
        return [cells for o, cells in self._rows("#failures", "offset") if int(o) == offset]

    def detail(self, table: str) -> dict[int, list[str]]:
        return {int(offset): cells for offset, cells in self._rows(table, "offset")}

    def text(self, element_id: str) -> str:
        text: str = self.js("return document.getElementById(arguments[0]).textContent", element_id)
        return text

    def type(self, element_id: str, text: str) -> None:
        field = self.driver.find_element("id", element_id)
        field.clear()
        field.send_keys(text)

    def click(self, element_id: str) -> None:
        self.driver.find_element("id", element_id).click()

    def set_token(self, token: str) -> None:
        self.type("token", token)
        self.click("token-save")

    def act(self, label: str, do: Any) -> str:
        """Run ``do`` (clicks an action) and return "<ok|err>: <text>" of the answer it shows:
        the result entry it added, once no longer pending, which must mention ``label``."""
        last = "document.querySelector('#results li[data-seq]')"
        before = self.js(f"const li = {last}; return li ? Number(li.dataset.seq) : 0")
        do()

        def answered() -> str | None:
            entry: list[str] | None = self.js(
                f"const li = {last};"
                "return li && Number(li.dataset.seq) > arguments[0] && li.className !== 'pending'"
                " ? [li.className, li.textContent] : null",
                before,
            )
            return f"{entry[0]}: {entry[1]}" if entry and label in entry[1] else None

        answer: str = wait_for(answered, PAGE_WAIT_S, f"the console's answer to {label}")
        return answer

    def wait(self, condition: Any, what: str, timeout_s: float = PAGE_WAIT_S) -> Any:
        return wait_for(condition, timeout_s, f"the console to show {what}")

    def shot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path
