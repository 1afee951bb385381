"""dpfl.train / dpfl.arrays / dpfl.load_run against `dpfl train`: a run from NumPy arrays and a dict config gives
the model.bin bytes and the epsilon that the command line gives for the INI file and CSV files holding the same
numbers (with the test set held out by data.test_fraction, and given as arrays); callbacks see every round and stop
the run; a KeyboardInterrupt raised in the callback leaves a run that resume=True finishes bit for bit like an
uninterrupted one; bad arrays are refused naming the array and index.

DPFL_CLI names the dpfl binary (tests/python.sh sets it), default build/dpfl.
"""

import json
import os
import subprocess

import pytest

import dpfl

np = pytest.importorskip("numpy")

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CLI = os.environ.get("DPFL_CLI") or os.path.join(ROOT, "build", "dpfl")

CONFIG = {
    "data": {"partition": "natural", "clients": 3},
    "model": {"arch": "mlp:6-8-3"},
    "fl": {"rounds": 5, "sampling": "poisson", "client_rate": 0.7, "local_steps": 4, "batch": 8, "lr": 0.2},
    "record_dp": {"enabled": True, "clip": 1.0, "noise": 1.1, "delta": 1e-4},
    "run": {"seed": 7, "threads": 1},
}


def data(seed=0, n=240):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6)).astype(np.float32)
    y = (np.argmax(X[:, :3] + 0.5 * X[:, 3:], axis=1)).astype(np.int64)
    ids = np.repeat([10, 20, 30], n // 3)  # client k is the k-th smallest id
    return X, y, ids


def ini_text(cfg, dataset, test=None):
    lines = []
    for sec, kv in cfg.items():
        lines.append("[%s]" % sec)
        if sec == "data":
            lines.append("dataset = %s" % dataset)
            lines.append("header = no")
            if test:
                lines.append("test = %s" % test)
        for k, v in kv.items():
            lines.append("%s = %s" % (k, "yes" if v is True else v))
    return "\n".join(lines) + "\n"


def write_csv(path, X, y):
    with open(path, "w") as f:
        for row, label in zip(X, y):
            f.write(",".join(repr(float(v)) for v in row) + ",%d\n" % label)


def cli_train(ini, out):
    r = subprocess.run([CLI, "train", ini, "--out", out, "--quiet", "--force"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def metrics_without_time(run_dir):
    out = []
    for m in dpfl.load_run(run_dir).metrics:
        m = dict(m)
        m.pop("wall_seconds", None)
        out.append(m)
    return out


@pytest.mark.parametrize("held_out", [True, False])
def test_arrays_train_like_the_cli_on_csv_files(tmp_path, held_out):
    """Same model.bin bytes, same epsilon, same metrics: arrays + dict config vs CSV files + INI."""
    X, y, ids = data()
    Xt, yt, _ = data(seed=1, n=60)
    files = []
    for k, cid in enumerate(np.unique(ids)):  # one file per client, in client order
        p = tmp_path / ("client%d.csv" % k)
        write_csv(p, X[ids == cid], y[ids == cid])
        files.append(str(p))
    test = None
    if not held_out:
        write_csv(tmp_path / "test.csv", Xt, yt)
        test = "csv:" + str(tmp_path / "test.csv")
    ini = tmp_path / "run.ini"
    ini.write_text(ini_text(CONFIG, "csv:" + ",".join(files), test))
    summary = cli_train(str(ini), str(tmp_path / "cli"))

    arr = dpfl.arrays(X, y, client_ids=ids, X_test=None if held_out else Xt, y_test=None if held_out else yt)
    assert arr.shared  # float32, C-contiguous: passed to the library as it is
    run = dpfl.train(CONFIG, data=arr, out=tmp_path / "py")
    assert read(tmp_path / "py" / "model.bin") == read(tmp_path / "cli" / "model.bin")
    assert run.epsilon() == summary["epsilon"] > 0
    assert metrics_without_time(tmp_path / "py") == metrics_without_time(tmp_path / "cli")
    assert run.config["data"]["dataset"] == "memory:arrays"
    assert run.summary["test_accuracy"] == summary["test_accuracy"]
    # the INI file itself, with the arrays in place of its files: the same run again
    run2 = dpfl.train(str(ini), data=arr, out=tmp_path / "py2")
    assert read(tmp_path / "py2" / "model.bin") == read(tmp_path / "cli" / "model.bin")
    assert run2.epsilon() == summary["epsilon"]


def test_dict_config_equals_ini_config_and_cli(tmp_path):
    """A dict config and the INI file of the same keys on a named dataset (heart, DPFL_DATA): one run, as the CLI's."""
    cfg = {"data": {"dataset": "heart", "partition": "natural", "clients": 4}, "model": {"arch": "logreg"},
           "fl": {"rounds": 3, "sampling": "all", "local_steps": 3, "batch": 16, "lr": 0.1},
           "client_dp": {"enabled": True, "clip": 1.0, "noise": 1.2, "delta": 1e-2},
           "run": {"seed": 3, "threads": 1, "allow_large_delta": True}}
    ini = tmp_path / "h.ini"
    ini.write_text("".join("[%s]\n%s\n" % (s, "\n".join("%s = %s" % (k, "yes" if v is True else v)
                                                          for k, v in kv.items())) for s, kv in cfg.items()))
    try:
        summary = cli_train(str(ini), str(tmp_path / "cli"))
    except AssertionError as e:
        if "heart" in str(e) and "not found" in str(e).lower():
            pytest.skip("heart-disease files not found (DPFL_DATA)")
        raise
    run = dpfl.train(cfg, out=tmp_path / "py")
    assert read(tmp_path / "py" / "model.bin") == read(tmp_path / "cli" / "model.bin")
    assert run.epsilon() == run.epsilon("client") == summary["client_epsilon"] > 0
    with pytest.raises(dpfl.DpflValueError, match="no record-level DP"):
        run.epsilon("record")
    # flat keys work too, and a bad value fails as --set fails, naming the key
    flat = {"%s.%s" % (s, k): v for s, kv in cfg.items() for k, v in kv.items()}
    run3 = dpfl.train(flat, out=tmp_path / "py3")
    assert read(tmp_path / "py3" / "model.bin") == read(tmp_path / "cli" / "model.bin")
    with pytest.raises(dpfl.DpflValueError, match="fl.lr"):
        dpfl.train(dict(cfg, fl=dict(cfg["fl"], lr="fast")), out=tmp_path / "bad")
    with pytest.raises(dpfl.DpflValueError, match="not empty"):
        dpfl.train(cfg, out=tmp_path / "py")  # an existing run is refused without force or resume
    assert run3.history[-1]["participants"] == 4


def test_callback_sees_every_round_and_stops_the_run(tmp_path):
    X, y, ids = data()
    seen = []
    run = dpfl.train(CONFIG, data=dpfl.arrays(X, y, client_ids=ids), out=tmp_path / "a", on_round=seen.append)
    assert [r["round"] for r in seen] == [1, 2, 3, 4, 5]
    assert all(r["rounds"] == 5 and r["client_epsilon"] is None for r in seen)
    eps = [r["record_epsilon"] for r in seen]
    assert eps == sorted(eps) and eps[-1] == pytest.approx(run.epsilon(), rel=1e-12)  # summary.json: 15 digits
    for r, h, m in zip(seen, run.history, run.metrics):
        assert r["metrics"] == m and h["epsilon"] == m["epsilon"] == pytest.approx(r["record_epsilon"], rel=1e-14)
        assert h["participants"] == r["participants"] >= 0
    stop = dpfl.train(CONFIG, data=dpfl.arrays(X, y, client_ids=ids), out=tmp_path / "b",
                      on_round=lambda r: r["round"] == 2)
    assert [m["round"] for m in stop.metrics] == [1, 2]
    assert stop.metrics == run.metrics[:2] or metrics_without_time(tmp_path / "b") == \
        metrics_without_time(tmp_path / "a")[:2]


def test_keyboard_interrupt_in_the_callback_then_resume(tmp_path):
    """Raised in the callback at round 3: re-raised after dpfl_run returns, the folder holds 3 released rounds, and
    resume=True ends with the bytes of an uninterrupted run."""
    X, y, ids = data()
    arr = dpfl.arrays(X, y, client_ids=ids)
    dpfl.train(CONFIG, data=arr, out=tmp_path / "straight")

    def interrupt(r):
        if r["round"] == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        dpfl.train(CONFIG, data=arr, out=tmp_path / "cut", on_round=interrupt)
    assert [m["round"] for m in dpfl.load_run(tmp_path / "cut").metrics] == [1, 2, 3]
    # the run keeps its config: a changed key is refused, the resumable ones are not
    with pytest.raises(dpfl.DpflValueError, match="keeps its config"):
        dpfl.train({"fl": {"lr": 0.5}}, data=arr, out=tmp_path / "cut", resume=True)
    # the arrays are the run's data: a resume without them says so
    with pytest.raises(dpfl.DpflValueError, match="memory:arrays"):
        dpfl.train(None, out=tmp_path / "cut", resume=True)
    seen = []
    run = dpfl.train(CONFIG, data=arr, out=tmp_path / "cut", resume=True, on_round=seen.append)
    assert [r["round"] for r in seen] == [4, 5]
    assert read(tmp_path / "cut" / "model.bin") == read(tmp_path / "straight" / "model.bin")
    assert metrics_without_time(tmp_path / "cut") == metrics_without_time(tmp_path / "straight")
    assert run.epsilon() == dpfl.load_run(tmp_path / "straight").epsilon()
    # another exception stops the run the same way and is raised as it is
    with pytest.raises(ZeroDivisionError):
        dpfl.train(CONFIG, data=arr, out=tmp_path / "zero", on_round=lambda r: 1 / 0)
    assert len(dpfl.load_run(tmp_path / "zero").metrics) == 1


def test_ctrl_c_stops_after_the_round(tmp_path):
    """SIGINT (Ctrl-C) while the run trains: dpfl.train's handler stops it after the round, then raises
    KeyboardInterrupt; the folder is complete for its rounds."""
    import signal
    X, y, ids = data()

    def sigint(r):
        if r["round"] == 2:
            os.kill(os.getpid(), signal.SIGINT)

    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt, match="after round 2"):
        dpfl.train(CONFIG, data=dpfl.arrays(X, y, client_ids=ids), out=tmp_path / "c", on_round=sigint)
    assert signal.getsignal(signal.SIGINT) is before
    run = dpfl.load_run(tmp_path / "c")
    assert [m["round"] for m in run.metrics] == [1, 2] and run.summary["rounds"] == 2


def test_load_run_of_a_cli_run(tmp_path):
    X, y, ids = data()
    d = tmp_path / "files"
    d.mkdir()
    for k, cid in enumerate(np.unique(ids)):
        write_csv(d / ("c%d.csv" % k), X[ids == cid], y[ids == cid])
    ini = tmp_path / "r.ini"
    ini.write_text(ini_text(CONFIG, "csv:" + str(d)))
    summary = cli_train(str(ini), str(tmp_path / "cli"))
    run = dpfl.load_run(str(tmp_path / "cli"))
    assert len(run.metrics) == len(run.diagnostics) == len(run.history) == 5
    assert run.summary == summary and run.epsilon() == summary["epsilon"]
    tree = run.events["record"]["tree"]
    assert "composed" in tree and run.events["record"]["epsilon"] == summary["epsilon"]
    assert run.config["fl"]["rounds"] == "5" and run.config["record_dp"]["enabled"] == "yes"
    model = run.model
    assert sorted(model) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    assert model["0.weight"].shape == (8, 6) and model["2.weight"].shape == (3, 8)
    assert all(a.dtype == np.float32 for a in model.values())
    assert run.standardization is None  # data.normalize = none
    with pytest.raises(dpfl.DpflValueError, match="not a run folder"):
        dpfl.load_run(str(tmp_path))


def test_arrays_errors_name_the_array_and_index():
    X, y, ids = data()
    Xn = X.copy()
    Xn[17, 4] = np.nan
    with pytest.raises(dpfl.DpflValueError, match=r"X\[17, 4\] = nan"):
        dpfl.arrays(Xn, y)
    with pytest.raises(dpfl.DpflValueError, match=r"y\[5\] = -1"):
        dpfl.arrays(X, np.where(np.arange(len(y)) == 5, -1, y))
    yf = y.astype(float)
    yf[9] = np.nan
    with pytest.raises(dpfl.DpflValueError, match=r"y\[9\] = nan"):
        dpfl.arrays(X, yf)
    with pytest.raises(dpfl.DpflValueError, match="y has 239 labels and X 240"):
        dpfl.arrays(X, y[:-1])
    with pytest.raises(dpfl.DpflValueError, match="X_test's examples are 1x1x5, X's 1x1x6"):
        dpfl.arrays(X, y, X_test=X[:, :5], y_test=y)
    with pytest.raises(dpfl.DpflValueError, match="dtype"):
        dpfl.arrays(X.astype(complex), y)
    with pytest.raises(dpfl.DpflValueError, match="client_ids"):
        dpfl.arrays(X, y, client_ids=ids[:10])
    a = dpfl.arrays(X.astype(np.float64), y)  # converted: a copy, said so
    assert not a.shared and a.x.dtype == np.float32 and a.x.flags["C_CONTIGUOUS"]
    b = dpfl.arrays(X[:, ::-1], y)  # not C-contiguous: a copy
    assert not b.shared
    img = dpfl.arrays(np.zeros((4, 3, 5, 5), np.float32), [0, 1, 2, 1])
    assert img.shape == (3, 5, 5)


def test_the_library_checks_arrays_too(tmp_path):
    """What dpfl.arrays passes is checked again in C (dpfl_dataset_from_caller): a label the config's data.classes
    does not allow is refused by the library, naming the array and index."""
    X, y, ids = data()
    cfg = dict(CONFIG, data=dict(CONFIG["data"], classes=2))
    with pytest.raises(dpfl.DpflValueError, match=r"train.y\[\d+\] = 2, but data.classes = 2"):
        dpfl.train(cfg, data=dpfl.arrays(X, y, client_ids=ids), out=tmp_path / "c")
    assert not (tmp_path / "c").exists()  # a run that fails its checks leaves no folder


def test_pyproject_version_is_the_library_version():
    with open(os.path.join(ROOT, "python", "pyproject.toml")) as f:
        text = f.read()
    assert 'version = "%s"' % dpfl.version() in text


def test_load_run_gives_the_standardization_model_bin_records(tmp_path):
    """data.normalize = standard with one given mean and one std per feature: model.bin records them (a mean of 1
    value is stored once per feature, as it was applied), and load_run hands them back."""
    X, y, ids = data()
    cfg = {k: dict(v) for k, v in CONFIG.items()}
    cfg["fl"]["rounds"] = 1
    std = [1.0, 2.0, 0.5, 1.5, 3.0, 0.25]
    cfg["data"].update({"normalize": "standard", "feature_mean": 0.125, "feature_std": ", ".join(map(str, std))})
    run = dpfl.train(cfg, data=dpfl.arrays(X, y, client_ids=ids), out=tmp_path / "s")
    mean, sd = run.standardization
    assert mean.dtype == sd.dtype == np.float64
    assert mean.tolist() == [0.125] * 6 and sd.tolist() == std
