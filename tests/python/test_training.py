"""A plain PyTorch training loop over qkv's model and data learns, and a
Ctrl-C during a long qkv call arrives as KeyboardInterrupt."""
import os
import signal
import subprocess
import sys
import textwrap
import time

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
