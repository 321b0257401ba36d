"""The store contract on the Delta store (subscriber/store/delta.py), on real Spark and Delta
Lake: the same suite the memory store of the fast tests passes."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from subscriber.store.base import Store
from subscriber.store.delta import DeltaStore
from tests.contract.store_contract import StoreContract

pytestmark = pytest.mark.integration


class DeltaStores:
    def __init__(self, spark: Any, root: Path) -> None:
        self.spark, self.root = spark, root
        self._names = itertools.count()

    def new(self) -> Store:
        return DeltaStore(self.spark, str(self.root / f"store-{next(self._names)}"))

    def again(self, store: Store) -> Store:
        return DeltaStore(self.spark, store.location)


class TestDeltaStore(StoreContract):
    @pytest.fixture
    def stores(self, spark: Any, tmp_path: Path) -> DeltaStores:
        return DeltaStores(spark, tmp_path)
