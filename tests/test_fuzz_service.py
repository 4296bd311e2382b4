"""Fuzzing the service's two file parsers: the tenants file (``--tenants``) and a job file
for ``utilon submit``.  Any file is either read or refused with one line naming it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from fuzzing import assert_clean_error, fuzz_settings
from utilon.cli.service import _jobs_in
from utilon.errors import UtilonError
from utilon.service.tenants import TenantBook, create_token

GOOD_HASH = "a" * 64
SHAPES = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=10)
    | st.just(GOOD_HASH),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["tenants", "admins", "token_sha256", "weight", "jobs", "id",
                         "stages", "x", "etl", "limits", "max_queued_jobs",
                         "max_running_share"]), inner, max_size=4), max_leaves=20)


def _read(path: Path, payload: bytes, parse: object) -> None:
    path.write_bytes(payload)
    try:
        parse(path)  # type: ignore[operator]
    except UtilonError as e:
        assert_clean_error(e, path.name)


@fuzz_settings()
@given(payload=st.binary(max_size=500) | SHAPES.map(lambda d: yaml.safe_dump(d).encode()))
def test_tenants_files(tmp_path_factory: pytest.TempPathFactory, payload: bytes) -> None:
    _read(tmp_path_factory.mktemp("t") / "tenants.yaml", payload, TenantBook.load)


@fuzz_settings()
@given(payload=st.binary(max_size=500) | SHAPES.map(lambda d: yaml.safe_dump(d).encode()))
def test_job_files(tmp_path_factory: pytest.TempPathFactory, payload: bytes) -> None:
    _read(tmp_path_factory.mktemp("j") / "jobs.yaml", payload, _jobs_in)


def test_a_written_tenants_file_reads_back(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    tok = create_token(f, "etl", weight=2.5)
    book = TenantBook.load(f)
    who = book.authenticate(tok)
    assert who is not None and who.name == "etl" and book.weight("etl") == 2.5
    assert (f.stat().st_mode & 0o777) == 0o600  # token hashes are not for everyone to read
