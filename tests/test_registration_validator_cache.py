"""The validators' generated code, kept between starts by content (issue #11): a start reuses
the code for a schema it has seen, an edited plugin's schema is generated afresh, a changed
generator is a new key, and the cache can never make a start fail or accept a bad schema."""

from __future__ import annotations

import json
import shutil
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest
from conftest import CLOSED_IN, make_plugin, make_spec, make_tool

from toolhost._composition import Host, load_host
from toolhost._model.settings import Settings, StoreUnavailable
from toolhost._registration import validator_cache
from toolhost._registration.discovery import PluginSource
from toolhost._registration.refusals import RegistrationRefused
from toolhost._registration.schema import compile_schema
from toolhost._registration.validator_cache import ValidatorCache


def _schema(max_length: int) -> dict[str, Any]:
    return {**CLOSED_IN, "properties": {"x": {"type": "string", "maxLength": max_length}}}


def _load(data_dir: Path, max_length: int, *, keep: bool = True) -> Host:
    spec = make_spec(input_schema=_schema(max_length))
    source = PluginSource("fx-dist", "fx", make_plugin(tools=[make_tool(spec)]))
    return load_host(Settings(env={"TOOLHOST_DATA_DIR": str(data_dir)}), sources=[source],
                     keep_validators=keep)


def _accepts(host: Host, text: str) -> bool:
    try:
        host.registry.resolve("fx.echo").validate_input({"x": text})
    except fastjsonschema.JsonSchemaValueException:
        return False
    return True


def _no_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> str:
        raise AssertionError("generated code that the cache holds")

    monkeypatch.setattr(fastjsonschema, "compile_to_code", refuse)


def test_a_start_reuses_the_code_and_an_edited_schema_is_generated_afresh(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _load(tmp_path, 3) as host:
        assert (_accepts(host, "abc"), _accepts(host, "abcd")) == (True, False)
    cached = json.loads((tmp_path / "cache" / "validators.json").read_text())
    assert len(cached) == 2  # the input and the output schema
    with monkeypatch.context() as patch:
        _no_generation(patch)
        with _load(tmp_path, 3) as host:
            assert (_accepts(host, "abc"), _accepts(host, "abcd")) == (True, False)
    # The plugin is edited (a longer bound): its new schema is a new key, never the old code.
    with _load(tmp_path, 5) as host:
        assert (_accepts(host, "abcde"), _accepts(host, "abcdef")) == (True, False)
    assert len(json.loads((tmp_path / "cache" / "validators.json").read_text())) == 3


def test_a_start_writes_it_once_its_stores_open_and_every_start_reads_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A command that is not check writes nothing to the data directory before its stores
    # open (a start refused over its data directory leaves it as it was), but reads; once they
    # open (``call``, ``serve``), what it generated is kept for the next start (D325).
    with _load(tmp_path, 3, keep=False) as host:
        assert _accepts(host, "abc")
    assert not (tmp_path / "cache").exists()
    with _load(tmp_path, 3, keep=False) as host:
        host.open()
    assert len(json.loads((tmp_path / "cache" / "validators.json").read_text())) == 2
    _no_generation(monkeypatch)
    with _load(tmp_path, 3, keep=False) as host:
        host.open()
        assert (_accepts(host, "abc"), _accepts(host, "abcd")) == (True, False)


def test_a_cache_no_start_would_read_is_not_written_again(tmp_path: Path) -> None:
    # Its directory opened to the group (an older version's umask): never read (below), so
    # rewriting it at every start that opens its stores would only cost the write.
    _load(tmp_path, 3).close()
    path = tmp_path / "cache" / "validators.json"
    path.parent.chmod(0o775)
    before = path.stat()
    with _load(tmp_path, 3, keep=False) as host:
        host.open()
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_start_refused_over_its_data_directory_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "toolhost.sqlite3").write_bytes(b"not a database, " * 64)
    with _load(tmp_path, 3, keep=False) as host, pytest.raises(StoreUnavailable):
        host.open()
    assert not (tmp_path / "cache").exists()


def test_the_cached_code_is_what_fastjsonschema_generates(tmp_path: Path) -> None:
    cache = ValidatorCache(tmp_path / "validators.json")
    for defaults in (True, False):
        compile_schema(_schema(7), apply_defaults=defaults, cache=cache)
        key = cache.key(_schema(7), apply_defaults=defaults)
        assert key is not None
        assert cache.get(key) == fastjsonschema.compile_to_code(_schema(7), use_default=defaults)
    assert cache.key(_schema(7), apply_defaults=True) != cache.key(_schema(7),
                                                                    apply_defaults=False)


def test_a_changed_generator_is_a_new_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "fastjsonschema"
    shutil.copytree(Path(fastjsonschema.__file__).parent, copy,
                    ignore=shutil.ignore_patterns("__pycache__"))
    spec = ModuleSpec("fastjsonschema", None, is_package=True)
    spec.submodule_search_locations = [str(copy)]
    monkeypatch.setattr(validator_cache, "find_spec", lambda name: spec)
    before = ValidatorCache(tmp_path / "v.json").key(_schema(3), apply_defaults=True)
    with (copy / "draft04.py").open("a") as f:
        f.write("\n# a reinstalled, different generator\n")
    after = ValidatorCache(tmp_path / "v.json").key(_schema(3), apply_defaults=True)
    assert before is not None and after is not None and before != after


def test_a_bad_schema_is_refused_at_every_start_and_never_cached(tmp_path: Path) -> None:
    bad = {**CLOSED_IN, "properties": {"x": {"type": "nonsense"}}}
    for _ in range(2):
        source = PluginSource("fx-dist", "fx", make_plugin(tools=[make_tool(
            make_spec(input_schema=bad))]))
        with pytest.raises(RegistrationRefused, match="does not compile"):
            load_host(Settings(env={"TOOLHOST_DATA_DIR": str(tmp_path)}), sources=[source],
                      keep_validators=True)
        entries = json.loads((tmp_path / "cache" / "validators.json").read_text())
        assert len(entries) == 1  # the output schema's, which compiled
        assert ValidatorCache(tmp_path / "v.json").key(bad, apply_defaults=True) not in entries


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'{"k": 1}', b"\xff"])
def test_an_unreadable_cache_is_empty_and_rewritten(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "cache" / "validators.json"
    path.parent.mkdir()
    path.write_bytes(content)
    with _load(tmp_path, 3) as host:
        assert _accepts(host, "abc") and not _accepts(host, "abcd")
    assert len(json.loads(path.read_text())) == 2


def test_an_unwritable_cache_is_not_an_error(tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("a file where the directory would be")
    with _load(tmp_path, 3) as host:
        assert _accepts(host, "abc") and not _accepts(host, "abcd")


def test_only_plain_json_makes_a_key(tmp_path: Path) -> None:
    cache = ValidatorCache(tmp_path / "v.json")
    # A tuple encodes as a list would; fastjsonschema's code may differ, so no key.
    odd = {**CLOSED_IN, "required": ("x",)}
    assert cache.key(odd, apply_defaults=True) is None
    assert compile_schema(odd, cache=cache)({"x": "a"}) == {"x": "a"}
    assert cache.key(_schema(3), apply_defaults=True) is not None


@pytest.mark.parametrize("opened", ["file", "directory"])
def test_code_someone_else_could_have_written_is_never_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opened: str) -> None:
    # Regression (issue #26): an edited entry of cache/validators.json ran at the next start.
    # The entries are read only from a file that nobody but this user could have written.
    import os

    _load(tmp_path, 3).close()
    path = tmp_path / "cache" / "validators.json"
    entries = json.loads(path.read_text())
    ran = tmp_path / "ran"
    planted = f"open({str(ran)!r}, 'w').close()\n"
    path.write_text(json.dumps({k: planted + v for k, v in entries.items()}))
    os.chmod(path if opened == "file" else path.parent, 0o666 if opened == "file" else 0o777)
    with _load(tmp_path, 3, keep=False) as host:
        assert (_accepts(host, "abc"), _accepts(host, "abcd")) == (True, False)
    assert not ran.exists()
    # The same file, only this user's again, is read (and its planted line runs): the mode
    # and owner are what decide, not the content.
    os.chmod(path, 0o600)
    os.chmod(path.parent, 0o700)
    with _load(tmp_path, 3, keep=False) as host:
        _accepts(host, "abc")  # the code is run when its validator is first used
    assert ran.exists()
