"""`import qkv` on one device: kNN and farthest point sampling there give the
CPU's indices, VNT-Net gives logits, and a VN-DGCNN training step gives every
parameter a finite gradient. scripts/gpu-check runs it on the GPU
(--device cuda), scripts/gpu-rehearse on the CPU under the GPU machine's
Python and torch.

  PYTHONPATH=gpu-bundle/python python scripts/python-smoke.py [--device cuda]
"""
import argparse
import sys

import torch

import qkv


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    device = torch.device(parser.parse_args().device)
    torch.manual_seed(0)
    x = torch.randn(4, 1024, 3, device=device)
    neighbours = qkv.ops.knn(x, 20)
    assert neighbours.device.type == device.type and torch.equal(neighbours.cpu(), qkv.ops.knn(x.cpu(), 20))
    picks = qkv.ops.farthest_point_sample(x, 256)
    assert picks.device.type == device.type and torch.equal(picks.cpu(), qkv.ops.farthest_point_sample(x.cpu(), 256))
    vnt = qkv.models.create("vnt", classes=5, linear_dim=8, heads=2, head_dim=4).to(device)
    logits = vnt(x.transpose(1, 2))
    assert logits.shape == (4, 5) and bool(torch.isfinite(logits).all())
    dgcnn = qkv.models.create("vn-dgcnn", classes=5, dropout=0.0).to(device).train()
    dgcnn(x.transpose(1, 2)).square().sum().backward()
    assert all(p.grad is not None and bool(torch.isfinite(p.grad).all()) for p in dgcnn.parameters())
    print("import qkv on torch %s, Python %d.%d: kNN and FPS on %s give the CPU's indices, VNT-Net's logits %s, "
          "a VN-DGCNN step trains" % (torch.__version__, *sys.version_info[:2], device, tuple(logits.shape)))


if __name__ == "__main__":
    main()
