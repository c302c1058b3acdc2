"""campaign.db is created whole: it exists only once it holds the campaign's options."""

from __future__ import annotations

import pytest

from onnxfuzz.store.db import Store


def test_a_created_store_holds_its_options_from_the_start(tmp_path) -> None:
    db = tmp_path / "campaign.db"
    store = Store.create(db, {"options": {"seed": 3}})
    try:
        assert store.get_meta("options") == {"seed": 3}
        assert store.done_ids() == set()
    finally:
        store.close()
    assert not (tmp_path / "campaign.db.new").exists()


def test_a_creation_that_fails_midway_leaves_no_campaign_db(tmp_path) -> None:
    db = tmp_path / "campaign.db"
    with pytest.raises(TypeError):  # the second value cannot be stored
        Store.create(db, {"options": {"seed": 3}, "versions": object()})
    assert not db.exists()  # so --resume is never offered a campaign without options
    store = Store.create(db, {"options": {"seed": 4}})  # the leftover part is replaced
    try:
        assert store.get_meta("options") == {"seed": 4}
        assert store.get_meta("versions") is None
    finally:
        store.close()
