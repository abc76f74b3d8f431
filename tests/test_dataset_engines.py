"""fstok.dataset on a real dask.distributed LocalCluster (2 worker processes) and a real local Ray
(num_cpus=2): shards byte-identical to the local engine and to per-document encode; the framework
helpers (Dask map_partitions, Ray Data map_batches, HF datasets.map) give tok.encode's ids."""
import os

import numpy as np
import pytest

import fstok
from conftest import needs_shared
from dataset_helpers import assert_docs, docs_of_dir, expected_ids, make_corpus_dir, shard_bytes
from fstok.dataset import InputError, open_shards, tokenize

pytestmark = needs_shared

OPTS = dict(split="lines", shard_size="40k", append_eot=True, allowed_special="all")


@pytest.fixture(scope="module")
def o200k():
    return fstok.get_encoding("o200k_base")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("eng_in") / "in")
    make_corpus_dir(d, variant=1)
    ref = str(tmp_path_factory.mktemp("eng_ref") / "out")
    tokenize(d, "o200k_base", ref, quiet=True, **OPTS)
    return d, ref


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def ray_session():
    ray = pytest.importorskip("ray", reason="ray is not installed")
    # a busy 2-core machine can take longer than Ray's default 30 s to register the raylet
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")
    os.environ.setdefault("RAY_agent_register_timeout_ms", "180000")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_dask_engine_byte_identical(o200k, corpus, dask_client, tmp_path):
    d, ref = corpus
    out = str(tmp_path / "dask")
    m = tokenize(d, "o200k_base", out, engine="dask", client=dask_client, quiet=True, **OPTS)
    assert len(m["shards"]) >= 4
    assert shard_bytes(out) == shard_bytes(ref)
    assert_docs(open_shards(out), expected_ids(o200k, docs_of_dir(d), eot=o200k.eot_token, allowed_special="all"))
    # the address form (what --engine dask --address uses)
    out2 = str(tmp_path / "dask2")
    tokenize(d, "o200k_base", out2, engine="dask", address=dask_client.scheduler.address, quiet=True, **OPTS)
    assert shard_bytes(out2) == shard_bytes(ref)


def test_dask_reports_bad_input(dask_client, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "x.jsonl").write_bytes(b'{"text": "a"}\n{"text": "\xff"}\n')
    with pytest.raises(InputError, match=r"x\.jsonl: line 2: invalid UTF-8"):
        tokenize(str(d), "o200k_base", str(tmp_path / "o"), engine="dask", client=dask_client, quiet=True)


def test_dask_bag_helper(o200k, corpus, dask_client):
    import dask.bag as db

    from fstok.dataset import dask_tokenize_partition

    docs = docs_of_dir(corpus[0])[:600]
    bag = db.from_sequence(docs, npartitions=4)
    got = bag.map_partitions(dask_tokenize_partition, "o200k_base", allowed_special="all").compute()
    assert [g.tolist() for g in got] == expected_ids(o200k, docs, allowed_special="all")


def test_ray_engine_byte_identical(o200k, corpus, ray_session, tmp_path):
    d, ref = corpus
    out = str(tmp_path / "ray")
    tokenize(d, "o200k_base", out, engine="ray", quiet=True, **OPTS)
    assert shard_bytes(out) == shard_bytes(ref)


def test_ray_tokenize_batches(o200k, corpus):
    """RayTokenize on the batch formats Ray Data hands it (numpy dict, pandas); a full Ray Data pipeline
    (and a Dask dataframe) runs in tools/diff_dataset.py, too slow for the suite."""
    import pandas as pd

    from fstok.dataset import RayTokenize

    docs = docs_of_dir(corpus[0])[:300]
    exp = expected_ids(o200k, docs, eot=o200k.eot_token, allowed_special="all")
    f = RayTokenize("o200k_base", allowed_special="all", append_eot=True)
    out = f({"text": np.array(docs, dtype=object), "n": np.arange(len(docs))})
    assert out["ids"].dtype == object and [a.tolist() for a in out["ids"]] == exp
    assert out["n"].tolist() == list(range(len(docs)))
    df = f(pd.DataFrame({"text": docs}))
    assert [a.tolist() for a in df["ids"]] == exp


def test_hf_datasets_map(o200k, corpus, tmp_path):
    datasets = pytest.importorskip("datasets", reason="HF datasets is not installed")
    from fstok.dataset import hf_tokenize_function

    docs = docs_of_dir(corpus[0])[:300]
    ds = datasets.Dataset.from_dict({"text": docs})
    fn = hf_tokenize_function("o200k_base", allowed_special="all", append_eot=True)
    res = ds.map(fn, batched=True, batch_size=64, num_proc=2, cache_file_name=str(tmp_path / "c.arrow"))
    assert res["input_ids"] == expected_ids(o200k, docs, eot=o200k.eot_token, allowed_special="all")
