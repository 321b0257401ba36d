"""The store contract on the memory store (subscriber/store/memory.py), the store of the fast
tests; tests/subscriber/integration/test_delta_store_contract.py runs the same suite on Delta."""

from __future__ import annotations

import pytest

from subscriber.store.base import Store
from subscriber.store.memory import MemoryStore
from tests.contract.store_contract import StoreContract


class MemoryStores:
    def new(self) -> Store:
        return MemoryStore()

    def again(self, store: Store) -> Store:
        assert isinstance(store, MemoryStore)
        return store.view()


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def stores(self) -> MemoryStores:
        return MemoryStores()
