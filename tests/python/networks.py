"""Every network of qkv's registry, small, with the options that switch on
each kind of weight it can have, and inputs for it: shared by the tests that
must reach every network."""
import torch

POINT_CLOUD = dict(linear_dim=4, heads=2, head_dim=4, k=4)
SEG_HEAD = dict(categories=2, category_dim=4, parts=3, seg_hidden=[8])
SPECT = dict(volume_shape=[10, 10, 10], channels=[4, 4])  # 8 SPECT tokens
SITES = dict(SPECT, features=8)  # as many CpG sites (mhca adds the two token sets)

MODELS = [
    ("mlp", {}),
    ("transformer-lm", dict(d_model=16, heads=2, layers=1)),
    ("lstm-lm", dict(embed=8, hidden=8)),
    ("gru-lm", dict(embed=8, hidden=8)),
    ("vnt", dict(POINT_CLOUD, classes=2, head_hidden=[8])),
    ("vnt", dict(POINT_CLOUD, classes=2, head_hidden=[8], layer_norm=True, edge_cross=True, normalize_frame=True)),
    ("vnt+n", dict(POINT_CLOUD, classes=2, head_hidden=[8])),
    ("vnt-local", dict(POINT_CLOUD, classes=2, head_hidden=[8], neighbours=4)),
    ("vn-dgcnn", dict(k=4, classes=2)),
    ("vn-dgcnn", dict(k=4, classes=2, pooling="max")),
    ("xyz-transformer", dict(d_model=16, heads=2, layers=1, embed_hidden=8, head_hidden=[8], classes=2)),
    ("vnt-seg", dict(POINT_CLOUD, **SEG_HEAD)),
    ("vn-dgcnn-seg", dict(k=4, **SEG_HEAD)),
    ("xyz-transformer-seg", dict(d_model=16, heads=2, layers=1, embed_hidden=8, **SEG_HEAD)),
    ("mhca", dict(SITES, embedding=4, width=8, heads=2, hidden=8)),
    ("concatnet", dict(SITES, embedding=4, width=8, hidden=8)),
    ("spectnet", dict(SPECT, hidden=8)),
    ("mhca-x", dict(SITES, embedding=4, width=8, heads=2, hidden=8, site_linear=True, standardise=True)),
    ("mhca-x", dict(SITES, embedding=4, width=8, heads=2, hidden=8, readout="mlp", readout_hidden=4,
                    scores="relu_dot", value_source="intensity")),
    ("mhca-x-uniform", dict(SITES, embedding=4, width=8, heads=2, hidden=8)),
    ("mhca-x-no-values", dict(SITES, embedding=4, width=8, heads=2, hidden=8)),
]


def inputs_of(model, batch=2):
    o = model.options
    made = {}
    for name in model.inputs:
        if name in ("points", "normals"):
            made[name] = torch.randn(batch, 3, 24)
        elif name == "category":
            made[name] = torch.arange(batch) % o["categories"]
        elif name == "tokens":
            made[name] = torch.randint(0, o["vocab"], (batch, 7))
        elif name == "spect":
            made[name] = torch.randn(batch, 1, *o["volume_shape"])
        elif name == "methylation":
            made[name] = torch.rand(batch, o["features"])
        elif name == "x":
            made[name] = torch.randn(batch, o["in_features"])
        else:
            raise AssertionError("no test input for %s" % name)
    return made


def weighted_sum(out):
    # A loss whose gradient reaches every output entry differently.
    return (out * torch.linspace(-1.0, 2.0, out.numel()).view(out.shape)).sum()


MODEL_IDS = ["%s-%d" % (n, i) for i, (n, _) in enumerate(MODELS)]

