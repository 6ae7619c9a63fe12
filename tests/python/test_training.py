"""A plain PyTorch training loop over qkv's model and data learns, qkv's batch
norms sum their statistics over torch.distributed's ranks when asked, and a
Ctrl-C during a long qkv call arrives as KeyboardInterrupt."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import qkv


def test_a_python_training_loop_learns(tmp_path):
    torch.manual_seed(1)
    settings = dict(synth_classes=["box", "sphere", "torus"], synth_train_per_class=16, synth_test_per_class=6,
                    points=128, points_per_shape=256, protocol="z/z", val_fraction=0.0)
    train = qkv.data.SyntheticShapes(tmp_path / "shapes", "train", **settings)
    test = qkv.data.SyntheticShapes(tmp_path / "shapes", "test", **settings)
    model = qkv.models.create("vnt", classes=3, linear_dim=16, heads=2, head_dim=4, k=8)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(train, batch_size=8, shuffle=True)

    def test_accuracy():
        model.eval()
        inputs, target = test.batch(range(len(test)))
        with torch.no_grad():
            return float((model(**inputs).argmax(-1) == target).double().mean())

    before = test_accuracy()
    for _ in range(20):
        model.train()
        for inputs, target in loader:
            loss = torch.nn.functional.cross_entropy(model(**inputs), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    after = test_accuracy()
    # 3 classes: chance is 1/3; this run reaches 0.89-1.0 (20 epochs, ~7 s)
    assert after >= 0.7 and after > before, (before, after)


RANKS_SCRIPT = """
import os, socket, sys
import torch, torch.distributed as dist
import qkv


def main(rank, world_size, folder):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    torch.manual_seed(0)
    layer = qkv.nn.sync_batch_norm(qkv.nn.VNLinearLeakyReLU(4, 6).double().train())
    part = torch.load(os.path.join(folder, "x.pt")).chunk(world_size)[rank].clone().requires_grad_()
    out = layer(part)
    out.pow(2).sum().backward()
    torch.save({"out": out.detach(), "grad": part.grad, "state": layer.state_dict()},
               os.path.join(folder, "rank%d.pt" % rank))
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free.getsockname()[1]))
    torch.multiprocessing.spawn(main, args=(2, sys.argv[1]), nprocs=2)
"""


def test_sync_batch_norm_gives_each_rank_the_statistics_of_the_whole_batch(tmp_path):
    # torch.nn.SyncBatchNorm.convert_sync_batchnorm finds only PyTorch's batch
    # norms; after qkv.nn.sync_batch_norm two ranks of three samples each give
    # the outputs, input gradients and running statistics of one process
    # holding all six.
    with pytest.raises(qkv.UsageError, match="init_process_group"):
        qkv.nn.sync_batch_norm(qkv.nn.VNBatchNorm(4))
    torch.manual_seed(0)
    x = torch.randn(6, 4, 3, 10, dtype=torch.float64)
    torch.save(x, tmp_path / "x.pt")
    (tmp_path / "ranks.py").write_text(RANKS_SCRIPT)
    path = os.pathsep.join(os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    r = subprocess.run([sys.executable, "ranks.py", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, PYTHONPATH=path))
    assert r.returncode == 0, r.stderr[-3000:]
    ranks = [torch.load(tmp_path / ("rank%d.pt" % rank)) for rank in range(2)]

    def run(inputs):
        torch.manual_seed(0)
        layer = qkv.nn.VNLinearLeakyReLU(4, 6).double().train()
        inputs = inputs.clone().requires_grad_()
        out = layer(inputs)
        out.pow(2).sum().backward()
        return out.detach(), inputs.grad, layer.state_dict()

    out, grad, state = run(x)
    assert torch.allclose(torch.cat([rank["out"] for rank in ranks]), out, rtol=1e-9, atol=1e-9)
    assert torch.allclose(torch.cat([rank["grad"] for rank in ranks]), grad, rtol=1e-9, atol=1e-9)
    for name in ("batchnorm.running_mean", "batchnorm.running_var"):
        for rank in ranks:
            assert torch.allclose(rank["state"][name], state[name], rtol=1e-9, atol=1e-12), name
        # What a rank alone would hold: the statistics of its half.
        assert not torch.allclose(run(x[:3])[2][name], state[name], rtol=1e-3)


def test_ctrl_c_in_a_long_call_raises_keyboard_interrupt(tmp_path):
    script = textwrap.dedent("""
        import sys, qkv
        print("ready", flush=True)
        try:
            qkv.data.SyntheticShapes(sys.argv[1], synth_train_per_class=4000, synth_test_per_class=10)
            print("finished")
        except KeyboardInterrupt as e:
            print("KeyboardInterrupt:", e)
        print("alive")
    """)
    child = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "many")], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    assert child.stdout.readline().strip() == "ready"
    time.sleep(3)  # writing 160,000 meshes takes minutes; reading them is polled per shape
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=120)
    assert "KeyboardInterrupt" in out and "alive" in out, (out, err)
    assert child.returncode == 0
