"""PyTorch counterpart of cutrain on the CPU: training images/s of fmnist_mlp and fmnist_cnn at
batch 64 and 256 (SGD, momentum 0.9, lr 0.01), then the epochs and seconds fmnist_mlp takes to
reach a test accuracy of 0.883 and fmnist_cnn 0.916 (the Fashion-MNIST benchmark's figures for
such networks; Adam, lr 0.001, batch 64, at most 30 and 15 epochs). PyTorch runs on 2 threads,
as cutrain does on a 2-core machine. Prints the JSON object so far after each measurement.

From a clone, with Debian's PyTorch (apt-get install python3-torch) and Fashion-MNIST:

  python3 tools/torch_cpu_peer.py [DATA_DIR]    # default /usr/share/datasets/fashion-mnist
"""
import gzip, json, sys, time
import numpy as np, torch, torch.nn as nn, torch.nn.functional as F
torch.set_num_threads(2); torch.manual_seed(0)
D = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/datasets/fashion-mnist"
def idx(p):
    b = gzip.open(p).read(); nd = b[3]
    dims = [int.from_bytes(b[4+4*i:8+4*i], "big") for i in range(nd)]
    return np.frombuffer(b, np.uint8, offset=4+4*nd).reshape(dims)
X = torch.tensor(idx(f"{D}/train-images-idx3-ubyte.gz")).float().div(255).sub(0.286).div(0.353).unsqueeze(1)
Y = torch.tensor(idx(f"{D}/train-labels-idx1-ubyte.gz")).long()
Xt = torch.tensor(idx(f"{D}/t10k-images-idx3-ubyte.gz")).float().div(255).sub(0.286).div(0.353).unsqueeze(1)
Yt = torch.tensor(idx(f"{D}/t10k-labels-idx1-ubyte.gz")).long()
def mlp(): return nn.Sequential(nn.Flatten(), nn.Linear(784,256), nn.ReLU(), nn.Linear(256,128), nn.ReLU(), nn.Linear(128,100), nn.ReLU(), nn.Linear(100,10))
def cnn(): return nn.Sequential(nn.Conv2d(1,32,3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32,64,3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(1600,128), nn.ReLU(), nn.Linear(128,10))
def speed(mk, batch, secs=4.0):
    m = mk(); opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    n = 0; t0 = time.time()
    while time.time() - t0 < secs:
        i = torch.randint(0, 60000, (batch,)); loss = F.cross_entropy(m(X[i]), Y[i])
        opt.zero_grad(); loss.backward(); opt.step(); n += 1
    return round(n * batch / (time.time() - t0))
def acc(m):
    with torch.no_grad(): return (m(Xt).argmax(1) == Yt).float().mean().item()
def to_target(mk, target, batch=64, max_epochs=30):
    torch.manual_seed(0); m = mk(); opt = torch.optim.Adam(m.parameters(), lr=1e-3); t0 = time.time()
    for ep in range(1, max_epochs + 1):
        m.train(); p = torch.randperm(60000)
        for k in range(0, 60000, batch):
            i = p[k:k+batch]; loss = F.cross_entropy(m(X[i]), Y[i]); opt.zero_grad(); loss.backward(); opt.step()
        m.eval(); a = acc(m)
        if a >= target: return dict(epochs=ep, test_acc=round(a, 4), seconds=round(time.time() - t0, 1))
    return dict(epochs=None, test_acc=round(a, 4), seconds=round(time.time() - t0, 1))
out = dict(peer="pytorch " + torch.__version__ + " cpu, 2 threads")
for name, mk in (("fmnist_mlp", mlp), ("fmnist_cnn", cnn)):
    for b in (64, 256):
        out[f"{name}_b{b}_img_s"] = speed(mk, b); print(json.dumps(out), flush=True)
out["fmnist_mlp_to_0.883"] = to_target(mlp, 0.883); print(json.dumps(out), flush=True)
out["fmnist_cnn_to_0.916"] = to_target(cnn, 0.916, max_epochs=15); print(json.dumps(out), flush=True)
