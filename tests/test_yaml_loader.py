"""The strict YAML loader reads inputs with libyaml's parser and PyYAML's safe rules: the same
data as PyYAML's pure-Python safe loader under the same three rules (timestamps kept as text,
only true and false read as booleans, a key given twice refused)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from worldsim.domain.errors import CardError
from worldsim.domain.files import load_document


class _PythonStrict(yaml.SafeLoader):
    """The reference: PyYAML's pure-Python safe loader with the three rules of worldsim's."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = [self.construct_object(k, deep=deep) for k, _ in node.value]
        hashable = [k for k in keys if getattr(type(k), "__hash__", None) is not None]
        if len(set(hashable)) != len(hashable):
            raise yaml.constructor.ConstructorError(None, None, "duplicate key", node.start_mark)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


_TRUE_OR_FALSE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_PythonStrict.yaml_implicit_resolvers = {
    key: [
        (
            tag,
            re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$") if tag.endswith(":bool") else rx,
        )
        for tag, rx in resolvers
        if tag != "tag:yaml.org,2002:timestamp"
    ]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.sampled_from(["2027-01-04", "2027-01-04T10:00:00Z", "yes", "no", "~", "0o17", "1e3"]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=20,
)


def test_the_loader_uses_libyaml_where_pyyaml_has_it() -> None:
    from worldsim.domain import files

    loader = files._StrictLoader  # the module's own loader: what every input goes through
    assert issubclass(loader, yaml.CSafeLoader) == bool(yaml.__with_libyaml__)


@settings(max_examples=60, deadline=None)
@given(_VALUES, st.sampled_from([None, True, False]))
def test_libyaml_reads_the_same_data_as_the_pure_python_safe_loader(
    tmp_path_factory: pytest.TempPathFactory, value: Any, flow: bool | None
) -> None:
    text = yaml.safe_dump({"v": value}, default_flow_style=flow, allow_unicode=True)
    path = tmp_path_factory.mktemp("yaml") / "input.yaml"
    path.write_text(text, encoding="utf-8")
    assert load_document(path) == yaml.load(text, Loader=_PythonStrict)


@pytest.mark.parametrize(
    "word", ["yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF", "y", "n"]
)
def test_yaml_1_1_boolean_words_stay_words(tmp_path: Path, word: str) -> None:
    """``cache: off`` and ``polarity: yes`` mean the words; only true and false are booleans."""
    path = tmp_path / "input.yaml"
    path.write_text(f"a: {word}\nb: [{word}]\nc: true\nd: False\n", encoding="utf-8")
    assert load_document(path) == {"a": word, "b": [word], "c": True, "d": False}


@pytest.mark.parametrize(
    "text",
    [
        "as_of: 2027-01-04\n",
        "as_of: 2027-01-04T10:00:00Z\n",
        "dates: [2027-01-04, 2027-01-04 10:00:00]\n",
        "a: &d 2027-01-04\nb: *d\n",
    ],
)
def test_timestamps_stay_text(tmp_path: Path, text: str) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(text, encoding="utf-8")
    data = load_document(path)
    assert data == yaml.load(text, Loader=_PythonStrict)
    assert all(isinstance(v, str) for v in _leaves(data))


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("id: x\nid: y\n", 2),
        ("seeds:\n  actors:\n    - {id: a, id: b}\n", 3),
        ("a: 1\nb:\n  c: 1\n  c: 2\n", 4),
        ("? [1, 2]\n: x\n? [1, 2]\n: y\n", None),  # an unhashable key: PyYAML refuses it
    ],
)
def test_a_key_given_twice_is_refused(tmp_path: Path, text: str, line: int | None) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CardError, match="malformed YAML") as caught:
        load_document(path)
    if line is not None:
        assert caught.value.line == line
        assert "duplicate key" in str(caught.value)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]
