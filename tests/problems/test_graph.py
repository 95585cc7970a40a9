"""Graph references over gloo ranks, against single-process float64 math.

The math reassembles the whole graph, table or batch from every rank's inputs and works
the plain way: adjacency counts as products of one-hot matrices, autograd for the
gradient scatter, dense matrices built entry by entry from CSR, bags pooled in Python
loops. It shares no code with the references (no all-to-all, no unique, no index_add),
so a wrong reference fails here.
"""

from __future__ import annotations

import pytest
import torch

from problems import all_problems, get_problem
from tests.problems.harness import (
    WORLD_SIZES,
    Expected,
    Inputs,
    check_against,
    rank_inputs,
    run_references,
)


def _one_hot(ids: torch.Tensor, n: int) -> torch.Tensor:
    """`[len(ids), n]` float64 with a 1 at each id (n may be 0)."""
    return (ids[:, None] == torch.arange(n)[None, :]).double()


def _cat(inputs: Inputs, name: str) -> torch.Tensor:
    return torch.cat([i[name].double() for i in inputs])


def _split(full: torch.Tensor, bounds: torch.Tensor) -> list[torch.Tensor]:
    edges = bounds.tolist()
    return [full[a:b] for a, b in zip(edges[:-1], edges[1:], strict=True)]


def gnn_halo_aggregation(inputs: Inputs, w: int) -> list[torch.Tensor]:
    x = _cat(inputs, "x")
    out = []
    for i in inputs:
        # counts[v, u]: the number of edges u -> v, as a product of one-hot matrices.
        counts = _one_hot(i["dst"], len(i["x"])).T @ _one_hot(i["src"], len(x))
        degree = counts.sum(1, keepdim=True)
        out.append(torch.where(degree > 0, counts @ x / degree.clamp(min=1), 0.0))
    return out


def feature_exchange_forward(inputs: Inputs, w: int) -> list[torch.Tensor]:
    x = _cat(inputs, "x")
    return [x[i["ids"]] for i in inputs]


def feature_exchange_backward(inputs: Inputs, w: int) -> list[torch.Tensor]:
    bounds = inputs[0]["bounds"]
    x = torch.zeros(int(bounds[-1]), inputs[0]["grad"].shape[1], dtype=torch.float64)
    x.requires_grad_()
    # The loss whose gradient w.r.t. the features is the scatter: Σ_r <x[ids_r], grad_r>.
    loss = sum((x[i["ids"]] * i["grad"].double()).sum() for i in inputs)
    loss.backward()
    return _split(x.grad, bounds)


def sharded_embedding_lookup(inputs: Inputs, w: int) -> list[torch.Tensor]:
    table = _cat(inputs, "table")
    return [_one_hot(i["ids"], len(table)) @ table for i in inputs]


def negative_sampling_scores(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, ...]]:
    emb = _cat(inputs, "emb")
    out = []
    for i in inputs:
        head = emb[i["src"]]
        pos = torch.einsum("ed,ed->e", head, emb[i["dst"]])
        negs = torch.einsum("ed,ekd->ek", head, emb[i["neg"]])
        out.append((pos, negs))
    return out


def kjt_alltoall(inputs: Inputs, w: int) -> list[torch.Tensor]:
    num_features, batch = inputs[0]["lengths"].shape
    dim = next(i["tables"].shape[2] for i in inputs if len(i["tables"]))
    out = []
    for i in inputs:
        pooled = torch.zeros(batch, num_features, dim, dtype=torch.float64)
        ids = iter(i["values"].tolist())
        for f in range(num_features):
            table = inputs[f % w]["tables"][f // w].double()
            for b in range(batch):
                for _ in range(int(i["lengths"][f, b])):
                    pooled[b, f] += table[next(ids)]
        assert next(ids, None) is None, "every id belongs to a bag"
        out.append(pooled.reshape(batch, num_features * dim))
    return out


def spmm_row_partition(inputs: Inputs, w: int) -> list[torch.Tensor]:
    b = _cat(inputs, "b")
    out = []
    for i in inputs:
        ptr = i["indptr"].tolist()
        dense = torch.zeros(len(ptr) - 1, len(b), dtype=torch.float64)
        for row in range(len(ptr) - 1):
            for k in range(ptr[row], ptr[row + 1]):
                dense[row, int(i["indices"][k])] += float(i["values"][k])
        out.append(dense @ b)
    return out


EXPECTED: dict[str, Expected] = {
    "graph-gnn-halo-aggregation": gnn_halo_aggregation,
    "graph-feature-exchange-forward": feature_exchange_forward,
    "graph-feature-exchange-backward": feature_exchange_backward,
    "graph-sharded-embedding-lookup": sharded_embedding_lookup,
    "graph-negative-sampling-scores": negative_sampling_scores,
    "graph-kjt-alltoall": kjt_alltoall,
    "graph-spmm-row-partition": spmm_row_partition,
}


@pytest.fixture(scope="module", params=WORLD_SIZES, ids=lambda w: f"world{w}")
def reference_outputs(request, tmp_path_factory):
    world_size = request.param
    return world_size, run_references(sorted(EXPECTED), world_size, tmp_path_factory.mktemp("rdv"))


def test_every_graph_problem_is_in_the_catalog():
    graph = {p.slug for p in all_problems() if p.category == "graph"}
    assert graph == set(EXPECTED)
    assert all(slug.startswith("graph-") for slug in graph)


@pytest.mark.parametrize("slug", sorted(EXPECTED))
def test_reference_matches_single_process_math(reference_outputs, slug):
    world_size, outputs = reference_outputs
    check_against(slug, world_size, outputs, EXPECTED[slug])


def _all(slug: str, case: str, w: int) -> Inputs:
    return [rank_inputs(slug, case, r, w) for r in range(w)]


@pytest.mark.parametrize("w", [2, 4, 8])
def test_partitions_are_ragged_shared_and_one_is_empty(w):
    for slug, case in [
        ("graph-gnn-halo-aggregation", "dev-empty-part"),
        ("graph-feature-exchange-forward", "dev-empty-idle"),
        ("graph-spmm-row-partition", "dev-empty-block"),
    ]:
        inputs = _all(slug, case, w)
        bounds = inputs[0]["bounds"]
        assert all(torch.equal(i["bounds"], bounds) for i in inputs), "every rank agrees"
        sizes = bounds.diff().tolist()
        assert sizes[1] == 0 and min(sizes[:1] + sizes[2:]) > 0
        if w > 2:
            assert len(set(sizes) - {0}) > 1, "the other partitions are ragged"


def test_halo_graph_has_isolated_nodes_remote_sources_and_an_empty_partition():
    inputs = _all("graph-gnn-halo-aggregation", "dev-fp32", 4)
    bounds = inputs[0]["bounds"].tolist()
    remote = isolated = 0
    for r, i in enumerate(inputs):
        remote += int(((i["src"] < bounds[r]) | (i["src"] >= bounds[r + 1])).sum())
        isolated += int((torch.bincount(i["dst"], minlength=len(i["x"])) == 0).sum())
    assert remote > 0 and isolated > 0
    empty = _all("graph-gnn-halo-aggregation", "dev-empty-part", 4)[1]
    assert empty["x"].shape == (0, 8) and len(empty["src"]) == 0


def test_feature_requests_are_ragged_repeat_and_include_an_idle_rank():
    for slug in ("graph-feature-exchange-forward", "graph-feature-exchange-backward"):
        inputs = _all(slug, "dev-empty-idle", 4)
        sizes = [len(i["ids"]) for i in inputs]
        assert sizes[0] == 0 and min(sizes[1:]) > 0 and len(set(sizes[1:])) > 1
        hot = torch.cat([i["ids"] for i in _all(slug, "dev-bf16", 4)])
        # 30% of the requests go to 16 hub nodes: the 16 most requested ids take over a
        # quarter (uniform requests alone would give them about a sixth).
        assert torch.bincount(hot).topk(16).values.sum() >= 0.25 * len(hot)
    grads = _all("graph-feature-exchange-backward", "dev-empty-idle", 4)
    assert grads[0]["grad"].shape == (0, 8)


def test_skewed_lookup_concentrates_on_one_shard_with_an_empty_batch():
    problem = get_problem("graph-sharded-embedding-lookup")
    rows = next(c for c in problem.dev_cases if c.name == "dev-skew-empty").params["rows"]
    for w in (2, 4, 8):
        inputs = _all("graph-sharded-embedding-lookup", "dev-skew-empty", w)
        assert len(inputs[1]["ids"]) == 0
        ids = torch.cat([i["ids"] for i in inputs])
        per_shard = torch.bincount(ids // (rows // w), minlength=w)
        assert per_shard.max() >= 0.85 * len(ids), "90% of ids pick one shard"
        assert len(ids.unique()) < len(ids), "ids repeat"


def test_negative_sampling_heads_are_local_and_a_rank_has_no_edges():
    inputs = _all("graph-negative-sampling-scores", "dev-empty", 4)
    shard = len(inputs[0]["emb"])
    for r, i in enumerate(inputs):
        assert bool(((i["src"] // shard) == r).all())
    assert inputs[1]["neg"].shape == (0, 3)
    assert len({len(i["src"]) for i in inputs}) > 1


def test_kjt_has_empty_bags_an_empty_feature_and_ranks_without_tables():
    inputs = _all("graph-kjt-alltoall", "dev-empty-feature", 4)
    assert int(inputs[1]["lengths"][2].sum()) == 0
    assert all(int(i["lengths"][2].sum()) > 0 for r, i in enumerate(inputs) if r != 1)
    assert any(bool((i["lengths"] == 0).any()) for i in inputs), "some bag is empty"
    # F = 3 features over 4 ranks: rank 3 owns no table.
    few = _all("graph-kjt-alltoall", "dev-bf16", 4)
    assert [len(i["tables"]) for i in few] == [1, 1, 1, 0]


def test_spmm_blocks_are_valid_csr_with_empty_rows():
    inputs = _all("graph-spmm-row-partition", "dev-empty-block", 4)
    empty_rows = 0
    for i in inputs:
        ptr = i["indptr"]
        assert ptr[0] == 0 and ptr[-1] == len(i["indices"]) and bool((ptr.diff() >= 0).all())
        for a, b in zip(ptr[:-1].tolist(), ptr[1:].tolist(), strict=True):
            assert bool((i["indices"][a:b].diff() > 0).all()), "columns ascend within a row"
        empty_rows += int((ptr.diff() == 0).sum())
    assert empty_rows > 0
    assert inputs[1]["indptr"].tolist() == [0] and inputs[1]["b"].shape == (0, 8)
