"""Campaigns the tests run to their end (imported by name: pytest puts this folder on
sys.path for its test modules)."""

from __future__ import annotations

from pathlib import Path

from onnxfuzz.run.campaign import Campaign, CampaignOptions


def finished(out: Path, opts: CampaignOptions) -> Campaign:
    """A new campaign in ``out``, started, run to its end and closed (read its results
    from the store's file and the bundles)."""
    c = Campaign(out, opts, resume=False)
    c.start()
    try:
        c.run()
    finally:
        c.close()
    return c
