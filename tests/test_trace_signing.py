"""Ed25519 signatures on a trace's seal: who sealed this head, checked by ``verify``.

A signed run's final record carries the key id (sealed with it) and the signature of its seal.
``verify --public-key`` confirms it or names the line; a bad key file is exit 2 before any
trace is written; the private key never reaches the trace.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.support import DEMO_CARD, forge, invoke
from worldsim.domain.errors import TraceError
from worldsim.trace.reader import read_trace, trace_head
from worldsim.trace.signing import Signer, load_public_key, load_signer
from worldsim.trace.verify import verify_trace
from worldsim.trace.writer import seal_line

TRACE = "merger-review__branching__ticks2__s0.jsonl"


cli = invoke


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("keys")
    for name in ("mine", "other"):
        made = cli("keygen", folder / f"{name}.key")
        assert made.code == 0, made.err
    return {
        "private": folder / "mine.key",
        "public": folder / "mine.key.pub",
        "other_public": folder / "other.key.pub",
        "other_private": folder / "other.key",
    }


@pytest.fixture(scope="module")
def signed(keys: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("signed")
    ran = cli("run", DEMO_CARD, "--ticks", "2", "--out", out, "--sign-key", keys["private"])
    assert ran.code == 0, ran.err
    return out / TRACE


def _rewrite_last(path: Path, target: Path, change: dict[str, Any], reseal: bool) -> None:
    """Change fields of the final record's data; ``reseal`` recomputes its seal (keeping the
    signature as it is), as a forger would."""
    lines = path.read_bytes().splitlines()
    last = json.loads(lines[-1])
    last["data"].update(change)
    if reseal:
        signature = last["data"]["signature"]
        last["data"].update(seal="", signature="")
        raw = seal_line(json.dumps(last, separators=(",", ":"), ensure_ascii=False).encode())
        raw = raw.replace(b'"signature":""', b'"signature":"' + signature.encode() + b'"')
    else:
        raw = json.dumps(last, separators=(",", ":"), ensure_ascii=False).encode()
    target.write_bytes(b"".join(line + b"\n" for line in [*lines[:-1], raw]))


def test_keygen_writes_a_private_key_only_its_owner_reads(keys: dict[str, Path]) -> None:
    assert stat.S_IMODE(keys["private"].stat().st_mode) == 0o600
    signer = load_signer(keys["private"])
    assert load_public_key(keys["public"]).key_id == signer.key_id
    again = cli("keygen", keys["private"])
    assert again.code == 2 and "already exists" in again.err
    assert load_signer(keys["private"]).key_id == signer.key_id  # not replaced


def test_a_signed_run_verifies_with_its_public_key(keys: dict[str, Path], signed: Path) -> None:
    key_id = load_signer(keys["private"]).key_id
    final = read_trace(signed).lines[-1].data
    assert final.key_id == key_id and len(final.signature) == 128
    unchecked = cli("verify", signed)
    assert unchecked.code == 0 and f"signed by key {key_id} (not checked)" in unchecked.err
    checked = cli("verify", signed, "--public-key", keys["public"])
    assert checked.code == 0 and f"signature by key {key_id} checked" in checked.err
    assert f"head {trace_head(signed)}" in checked.err


def test_the_private_key_never_reaches_the_trace(keys: dict[str, Path], signed: Path) -> None:
    key = serialization.load_pem_private_key(keys["private"].read_bytes(), password=None)
    assert isinstance(key, Ed25519PrivateKey)
    raw = key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    blob = signed.read_bytes()
    for secret in (raw.hex().encode(), keys["private"].read_bytes().split(b"\n")[1]):
        assert secret not in blob
    assert str(keys["private"]).encode() not in blob  # nor its path, in the recorded config


def test_another_public_key_is_refused(keys: dict[str, Path], signed: Path) -> None:
    proc = cli("verify", signed, "--public-key", keys["other_public"])
    lines = signed.read_bytes().count(b"\n")
    assert (
        proc.code == 1 and f"{signed}:{lines}:" in proc.err and "not by the given key" in proc.err
    )


def test_a_tampered_signature_is_refused(
    keys: dict[str, Path], signed: Path, tmp_path: Path
) -> None:
    final = read_trace(signed).lines[-1].data
    flipped = ("0" if final.signature[0] != "0" else "1") + final.signature[1:]
    tampered = tmp_path / "tampered.jsonl"
    _rewrite_last(signed, tampered, {"signature": flipped}, reseal=False)
    assert verify_trace(tampered).exit_code == 0  # the seal leaves the signature out
    proc = cli("verify", tampered, "--public-key", keys["public"])
    assert proc.code == 1 and "does not match its seal" in proc.err


def test_a_signature_kept_on_a_rewritten_record_is_refused(
    keys: dict[str, Path], signed: Path, tmp_path: Path
) -> None:
    """A forger rewrites the report (which nothing else repeats), re-chains and reseals, and
    keeps the old signature: the trace verifies as a chain, the key refuses it."""
    signature = read_trace(signed).lines[-1].data.signature

    def reworded(records: list[dict[str, Any]]) -> None:
        next(r for r in records if r["type"] == "report")["data"]["summary"] = "rewritten"

    resealed = tmp_path / "resealed.jsonl"
    forge(signed, resealed, reworded)
    forged = tmp_path / "forged.jsonl"
    _rewrite_last(resealed, forged, {"signature": signature}, reseal=True)
    assert verify_trace(forged).exit_code == 0  # chain and seal recomputed
    proc = cli("verify", forged, "--public-key", keys["public"])
    assert proc.code == 1 and "does not match its seal" in proc.err
    rejected = read_trace(signed).lines[-1].data.forks_rejected
    counted = tmp_path / "counted.jsonl"  # the final record's own counts are checked too
    _rewrite_last(signed, counted, {"forks_rejected": rejected + 1}, reseal=True)
    assert "run_completed forks_rejected" in cli("verify", counted).err


def test_a_stripped_signature_reads_as_unsigned_only_with_the_start_rewritten(
    keys: dict[str, Path], signed: Path, tmp_path: Path
) -> None:
    """Stripped from the final record alone, the signature the run's start names is missing:
    refused. Stripped with the start's ``signed_by`` (every line re-chained), the trace reads
    as unsigned, and the key refuses it."""
    stripped = tmp_path / "stripped.jsonl"
    _rewrite_last(signed, stripped, {"key_id": "", "signature": ""}, reseal=True)
    alone = cli("verify", stripped)
    assert alone.code == 1 and "run_completed is not signed, not by the key" in alone.err

    def unsigned(records: list[dict[str, Any]]) -> None:
        records[0]["data"]["signed_by"] = ""
        records[-1]["data"]["key_id"] = ""

    forge(signed, stripped, unsigned)
    plain = cli("verify", stripped)
    assert plain.code == 0 and "unsigned" in plain.err
    proc = cli("verify", stripped, "--public-key", keys["public"])
    assert proc.code == 1 and "run_completed is not signed" in proc.err


def test_a_signed_run_resumed_is_signed_again_at_its_new_end(
    keys: dict[str, Path], signed: Path, tmp_path: Path
) -> None:
    blob = signed.read_bytes()
    crashed = tmp_path / TRACE
    crashed.write_bytes(blob[: len(blob) * 2 // 3])  # killed mid-run: nothing signed yet
    assert cli("verify", crashed, "--public-key", keys["public"]).code == 1
    resumed = cli("run", "--resume", crashed, "--sign-key", keys["private"])
    assert resumed.code == 0, resumed.err
    assert f"head {trace_head(crashed)}" in resumed.out.replace("\n", "")
    assert cli("verify", crashed, "--public-key", keys["public"]).code == 0
    assert read_trace(crashed).first("run_resumed") is not None


@pytest.mark.parametrize("given", [None, "other_private"])
def test_a_signed_run_is_resumed_only_with_its_key(
    keys: dict[str, Path], signed: Path, tmp_path: Path, given: str | None
) -> None:
    """Without a key, or with another one, the resume is refused before anything is written:
    the run's start names the key its end is to be signed with."""
    key_id = read_trace(signed).started.signed_by
    assert key_id == load_public_key(keys["public"]).key_id
    blob = signed.read_bytes()
    crashed = tmp_path / TRACE
    crashed.write_bytes(blob[: len(blob) * 2 // 3])
    with_key = ["--sign-key", keys[given]] if given else []
    refused = cli("run", "--resume", crashed, *with_key)
    assert refused.code == 2
    said = refused.err.replace("\n", "")
    assert f"started to be signed with key {key_id}" in said
    assert ("given no key" if given is None else "given key ") in said
    assert "Traceback" not in refused.err
    assert crashed.read_bytes() == blob[: len(blob) * 2 // 3]


def test_an_unsigned_run_records_no_key_and_may_be_signed_when_resumed(
    keys: dict[str, Path], tmp_path: Path
) -> None:
    ran = cli("run", DEMO_CARD, "--ticks", "2", "--out", tmp_path)
    assert ran.code == 0, ran.err
    trace = tmp_path / TRACE
    assert read_trace(trace).started.signed_by == ""
    blob = trace.read_bytes()
    trace.write_bytes(blob[: len(blob) * 2 // 3])
    assert cli("run", "--resume", trace, "--sign-key", keys["private"]).code == 0
    assert cli("verify", trace, "--public-key", keys["public"]).code == 0


def _bad_keys(folder: Path, keys: dict[str, Path]) -> dict[str, tuple[Path, str]]:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    rsa_pem = rsa_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    locked = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )
    files = {"rsa": rsa_pem, "encrypted": locked, "garbage": b"not a key\n"}
    for name, content in files.items():
        (folder / name).write_bytes(content)
    return {
        "missing": (folder / "absent.key", "signing key not found"),
        "public-key": (keys["public"], "not a PEM private key"),
        "rsa": (folder / "rsa", "not an Ed25519 key"),
        "encrypted": (folder / "encrypted", "encrypted"),
        "garbage": (folder / "garbage", "not a PEM private key"),
    }


@pytest.mark.parametrize("bad", ["missing", "public-key", "rsa", "encrypted", "garbage"])
@pytest.mark.parametrize("command", ["run", "forecast", "resume"])
def test_a_bad_key_file_is_exit_2_before_any_trace_is_written(
    keys: dict[str, Path], signed: Path, tmp_path: Path, bad: str, command: str
) -> None:
    key, message = _bad_keys(tmp_path, keys)[bad]
    out = tmp_path / "out"
    crashed = tmp_path / "crashed.jsonl"
    blob = signed.read_bytes()[: len(signed.read_bytes()) // 2]
    crashed.write_bytes(blob)
    args: list[str | Path] = {
        "run": ["run", DEMO_CARD, "--ticks", "2", "--out", out],
        "forecast": ["forecast", DEMO_CARD, "--model", "offline", "--out", out],
        "resume": ["run", "--resume", crashed],
    }[command]
    proc = cli(*args, "--sign-key", key)
    assert proc.code == 2
    assert str(key) in proc.err and message in proc.err
    assert len(proc.err.strip().splitlines()) == 1
    assert not out.exists()
    assert crashed.read_bytes() == blob


def test_the_public_key_file_is_checked_too(signed: Path, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pub"
    garbage.write_text("nope\n")
    proc = cli("verify", signed, "--public-key", garbage)
    assert proc.code == 2 and str(garbage) in proc.err and "not a PEM public key" in proc.err


def test_an_unsigned_trace_seals_as_before(tmp_path: Path) -> None:
    """Without a key the terminal record carries empty key_id and signature, and the seal is
    the SHA-256 of the line with its seal emptied: the rule traces were written by before."""
    ran = cli("run", DEMO_CARD, "--ticks", "2", "--out", tmp_path)
    assert ran.code == 0, ran.err
    last = (tmp_path / TRACE).read_bytes().splitlines()[-1]
    data = json.loads(last)["data"]
    assert data["key_id"] == "" and data["signature"] == ""
    unsealed = last.replace(data["seal"].encode(), b"")
    assert hashlib.sha256(unsealed).hexdigest() == data["seal"]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_keygen_refuses_a_private_key_that_git_does_not_ignore(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    target = repo / "keys" / "trace.key"
    refused = cli("keygen", target)
    assert refused.code == 2 and len(refused.err.strip().splitlines()) == 1
    assert str(target) in refused.err and "not ignored by git" in refused.err
    assert "add keys/trace.key to .gitignore" in refused.err and "--allow-unignored" in refused.err
    assert not (repo / "keys").exists()  # nothing written
    (repo / ".gitignore").write_text("keys/trace.key\n")  # the advice, taken
    assert cli("keygen", target).code == 0
    assert cli("keygen", repo / "loose.key", "--allow-unignored").code == 0
    outside = tmp_path / "elsewhere" / "trace.key"  # no work tree: nothing to fear
    assert cli("keygen", outside).code == 0


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_keygen_at_the_work_tree_root_advises_ignoring_the_key_file_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "newuser"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    monkeypatch.chdir(repo)
    refused = cli("keygen", "mykey.key")
    assert refused.code == 2 and len(refused.err.strip().splitlines()) == 1
    assert "add mykey.key to .gitignore" in refused.err
    assert "newuser" not in refused.err.split("not ignored by git")[1]
    assert sorted(p.name for p in repo.iterdir()) == [".git"]
    (repo / ".gitignore").write_text("mykey.key\n")  # the advice, taken
    assert cli("keygen", "mykey.key").code == 0


def test_keygen_outside_any_work_tree_gives_no_gitignore_advice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    made = cli("keygen", tmp_path / "loose" / "mykey.key")
    assert made.code == 0, made.err
    assert "gitignore" not in made.out + made.err
    assert (tmp_path / "loose" / "mykey.key").is_file()


def _resealed(signed: Path, target: Path, signer: Signer) -> Path:
    """The final record sealed again and signed by ``signer`` (its key id with it)."""
    lines = signed.read_bytes().splitlines()
    last = json.loads(lines[-1])
    last["data"].update(key_id=signer.key_id, seal="", signature="")
    raw = seal_line(json.dumps(last, separators=(",", ":"), ensure_ascii=False).encode(), signer)
    target.write_bytes(b"".join(line + b"\n" for line in [*lines[:-1], raw]))
    return target


def test_a_run_resealed_with_another_key_than_its_start_names_is_refused(
    keys: dict[str, Path], signed: Path, tmp_path: Path
) -> None:
    """Signed again with another key, the final record's signature is sound for that key; the
    run's start names the key it was to be signed with, and ``verify`` refuses it, with or
    without a public key."""
    mine, other = load_signer(keys["private"]), load_signer(keys["other_private"])
    resigned = _resealed(signed, tmp_path / "resigned.jsonl", other)
    assert read_trace(resigned).lines[-1].data.key_id == other.key_id  # the chain holds
    expected = (
        f"{resigned}:{len(read_trace(resigned).lines)}: run_completed is signed by key "
        f"{other.key_id}, not by the key run_started.signed_by names ({mine.key_id})"
    )
    for public_key in (None, load_public_key(keys["other_public"])):
        with pytest.raises(TraceError) as caught:
            verify_trace(resigned, public_key=public_key)
        assert str(caught.value) == expected
    checked = cli("verify", resigned)
    assert checked.code == 1 and expected in checked.err
    assert len(checked.err.strip().splitlines()) == 1
