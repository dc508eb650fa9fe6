"""A dataset's metric (accuracy, or ROC AUC for two classes) reaches the validation reward, the
model selection, the final test and the records; a fit's recorded test ROC AUC equals the
pairwise definition computed from its own predictions."""

import dataclasses
import json

import numpy as np
import pytest
from test_metrics import pairwise_auc

import policy_gnn_jax as pg
from policy_gnn_jax import data


def _two_class(metric="roc_auc"):
    ds = data.make_csbm(num_nodes=1600, num_classes=2, num_features=16, homophily=0.6, seed=3)
    return dataclasses.replace(ds, metric=metric)


@pytest.mark.parametrize("method", ["gcn", "policy-gnn"])
def test_the_recorded_test_score_is_the_roc_auc_of_the_fits_own_logits(method):
    ds = _two_class()
    fit = pg.fit(ds, pg.Config.tiny(epochs=5), method=method, seeds=2, progress=False)
    assert fit.record["metric"] == "roc_auc"
    logits = fit.predict_logits(ds.test_index)  # [S, M, 2]
    positive = ds.labels[ds.test_index] == 1
    counted = np.ones_like(positive)
    for s, got in enumerate(fit.record["test_metric"]["per_seed"]):
        scores = logits[s, :, 1] - logits[s, :, 0]
        assert got == pytest.approx(pairwise_auc(scores, positive, counted), abs=1e-5)


def test_the_same_fit_scored_by_accuracy_differs_only_in_the_score():
    auc = pg.fit(_two_class(), pg.Config.tiny(epochs=5), method="gcn", seeds=1, progress=False)
    acc = pg.fit(_two_class("accuracy"), pg.Config.tiny(epochs=5), method="gcn", seeds=1,
                 progress=False)  # fmt: skip
    assert acc.record["metric"] == "accuracy"
    ds = _two_class()
    predicted = acc.predict(ds.test_index)[0]
    assert acc.record["test_metric"]["mean"] == pytest.approx(
        np.mean(predicted == ds.labels[ds.test_index]), abs=1e-6
    )
    assert auc.record["test_metric"]["mean"] != acc.record["test_metric"]["mean"]
    assert auc.record["dataset_fingerprint"] != acc.record["dataset_fingerprint"]


def test_an_accuracy_datasets_fingerprint_hashes_no_metric():
    """An accuracy dataset's fingerprint is the hash of its arrays and parts' lengths alone."""
    import hashlib

    ds = _two_class("accuracy")
    digest = hashlib.sha256()
    f = ds.features
    for array in (f.indptr, f.indices, f.data, np.asarray(f.shape), ds.labels, ds.edges,
                  ds.train_index, ds.val_index, ds.test_index):  # fmt: skip
        digest.update(np.ascontiguousarray(array).tobytes())
    sizes = [len(ds.train_index), len(ds.val_index), len(ds.test_index)]
    digest.update(np.array(sizes, np.int64).tobytes())
    assert ds.fingerprint() == digest.hexdigest()


def test_roc_auc_needs_two_classes_and_a_known_metric():
    ds = data.make_csbm(num_nodes=1600, num_classes=3, seed=0)
    with pytest.raises(pg.InvalidDatasetError, match="needs two classes"):
        dataclasses.replace(ds, metric="roc_auc")
    with pytest.raises(pg.InvalidDatasetError, match="metric must be one of"):
        dataclasses.replace(ds, metric="f1")


def test_a_saved_fit_keeps_its_metric(tmp_path):
    fit = pg.fit(_two_class(), pg.Config.tiny(epochs=2), method="gcn", seeds=1, progress=False)
    fit.save(tmp_path / "f")
    back = pg.load(tmp_path / "f")
    assert back.dataset.metric == "roc_auc"
    assert json.loads((tmp_path / "f" / "results.json").read_text())["metric"] == "roc_auc"


def test_a_two_class_npz_file_is_scored_by_roc_auc(tmp_path):
    rng = np.random.default_rng(0)
    n = 40
    masks = np.zeros((3, 1, n), bool)
    order = rng.permutation(n)
    for i, part in enumerate(np.array_split(order, 3)):
        masks[i, 0, part] = True
    edges = np.stack([np.arange(n - 1), np.arange(1, n)], 1)
    np.savez(tmp_path / "two.npz", node_features=rng.normal(size=(n, 4)).astype(np.float32),
             node_labels=np.arange(n) % 2, edges=edges, train_masks=masks[0],
             val_masks=masks[1], test_masks=masks[2])  # fmt: skip
    assert pg.load_dataset(str(tmp_path / "two.npz")).metric == "roc_auc"
    three = tmp_path / "three.npz"
    np.savez(three, node_features=rng.normal(size=(n, 4)).astype(np.float32),
             node_labels=np.arange(n) % 3, edges=edges, train_masks=masks[0],
             val_masks=masks[1], test_masks=masks[2])  # fmt: skip
    assert pg.load_dataset(str(three)).metric == "accuracy"
