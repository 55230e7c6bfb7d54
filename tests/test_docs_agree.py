"""What the docs show as a file is that file: the study manifest docs/experiments.md opens with
is scenarios/studies/demo-study.yaml, key for key."""

from __future__ import annotations

import re

import yaml

from tests.support import ROOT


def test_the_experiments_manifest_is_the_demo_study() -> None:
    text = (ROOT / "docs" / "experiments.md").read_text(encoding="utf-8")
    shown = re.search(r"```yaml\n(.*?)```", text, re.DOTALL)
    assert shown is not None
    assert "scenarios/studies/demo-study.yaml" in text[: shown.start()]
    demo = ROOT / "scenarios" / "studies" / "demo-study.yaml"
    assert yaml.safe_load(shown.group(1)) == yaml.safe_load(demo.read_text(encoding="utf-8"))
