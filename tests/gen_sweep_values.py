#!/usr/bin/env python3
"""Prints PyTorch's answers for the regression cases of issue 27 (the correctness sweep) in
tests/test_edge_inputs.cpp. The C++ tests hold these values inline; rerun this script (Debian's
python3-torch 1.13) to check them:  /usr/bin/python3 tests/gen_sweep_values.py
"""
import torch
import torch.nn.functional as F


def show(name, value):
    print(f"{name}: {value}")


def main():
    torch.set_printoptions(precision=8)
    # item 1 / 14: 0-d tensors through movedim and flip are returned as they are
    s = torch.tensor(2.5)
    show("movedim(0-d, 0, -1)", torch.movedim(s, 0, -1).item())
    show("flip(0-d, [0])", torch.flip(s, [0]).item())
    # item 2: chunk / split of a size-0 dim give one empty piece per chunk; glu is empty
    e = torch.zeros(3, 0)
    show("chunk(zeros(3,0), 2, 1) shapes", [list(p.shape) for p in torch.chunk(e, 2, 1)])
    show("split(zeros(3,0), 2, 1) shapes", [list(p.shape) for p in torch.split(e, 2, 1)])
    show("glu(zeros(3,0), 1).shape", list(F.glu(e, 1).shape))
    # item 6: det of 0x0 matrices is 1; inv / solve are empty
    show("det(zeros(2,0,0))", torch.linalg.det(torch.zeros(2, 0, 0)).tolist())
    show("inv(zeros(2,0,0)).shape", list(torch.linalg.inv(torch.zeros(2, 0, 0)).shape))
    show("solve(zeros(2,0,0), zeros(2,0,3)).shape",
         list(torch.linalg.solve(torch.zeros(2, 0, 0), torch.zeros(2, 0, 3)).shape))
    # item 11: std / var of a constant slice: zero gradients
    for dt in (torch.float32, torch.float64):
        x = torch.tensor([[0.1, 0.1, 0.1], [1.0, 2.0, 4.0]], dtype=dt, requires_grad=True)
        torch.std(x, 1).sum().backward()
        show(f"std grad {dt}", x.grad.tolist())
        x.grad = None
        torch.var(x, 1).sum().backward()
        show(f"var grad {dt}", x.grad.tolist())
    # item 12: binary_cross_entropy at saturated probabilities
    p = torch.tensor([0.0, 1.0, 0.0, 1.0, 0.25], requires_grad=True)
    t = torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0])
    loss = F.binary_cross_entropy(p, t)
    loss.backward()
    show("bce loss", loss.item())
    show("bce grad", p.grad.tolist())
    # item 13: norm p=0 is differentiable with a zero gradient
    x = torch.tensor([0.0, 2.0, -3.0], requires_grad=True)
    n0 = torch.norm(x, p=0)
    n0.backward()
    # torch 1.13 leaves x.grad undefined (an all-zero gradient, in autograd's terms)
    grad = x.grad if x.grad is not None else torch.zeros_like(x)
    show("norm p=0", (n0.item(), grad.tolist()))
    # item 15: reduced QR of a wide matrix, differentiated
    a = torch.tensor([[2.0, -1.0, 0.5, 3.0], [1.0, 4.0, -2.0, 0.25]], dtype=torch.float64,
                     requires_grad=True)
    q, r = torch.linalg.qr(a)
    (q.sum() * 0.5 + (r * torch.arange(8.0, dtype=torch.float64).reshape(2, 4)).sum()).backward()
    show("qr wide Q", q.tolist())
    show("qr wide R", r.tolist())
    show("qr wide grad", a.grad.tolist())


if __name__ == "__main__":
    main()


def saturated_losses():
    """The loss family at saturated or degenerate inputs (issue 27's 'saturated probability'
    class): each loss and its input's gradient, NaN/inf as PyTorch gives them."""
    def run(name, fn, *inputs):
        xs = [t.clone().requires_grad_(True) for t in inputs]
        loss = fn(*xs)
        loss.backward()
        grads = [x.grad.tolist() if x.grad is not None else None for x in xs]
        show(name, (loss.item(), grads))
    t = torch.tensor
    run("bce_with_logits saturated", lambda x: F.binary_cross_entropy_with_logits(
        x, t([1.0, 0.0, 1.0, 0.0])), t([100.0, -100.0, -100.0, 100.0]))
    run("kl_div zero target", lambda x: F.kl_div(x, t([0.0, 0.5, 0.5]), reduction="sum"),
        t([-1e30, -0.7, -0.7]))
    run("cross_entropy probs zero", lambda x: F.cross_entropy(x, t([[0.0, 1.0, 0.0]])),
        t([[-1e30, 2.0, 1.0]]))
    run("cosine_embedding zero vector", lambda a, b: F.cosine_embedding_loss(
        a, b, t([1.0, -1.0]), margin=-0.5), t([[0.0, 0.0], [1.0, 2.0]]), t([[1.0, 1.0], [0.0, 0.0]]))
    run("triplet equal anchor positive", lambda a, p, n: F.triplet_margin_loss(a, p, n),
        t([[1.0, 2.0]]), t([[1.0, 2.0]]), t([[0.5, 0.0]]))
    run("poisson_nll zero input", lambda x: F.poisson_nll_loss(x, t([0.0, 2.0]),
        log_input=False), t([0.0, 0.0]))
    run("smooth_l1 beta0 at zero", lambda x: F.smooth_l1_loss(x, t([1.0, 2.0]), beta=0.0),
        t([1.0, 3.0]))
    run("l1 at zero", lambda x: F.l1_loss(x, t([1.0, 2.0])), t([1.0, 3.0]))
    run("huber at zero", lambda x: F.huber_loss(x, t([1.0, 2.0])), t([1.0, 4.0]))
    run("margin_ranking at hinge", lambda a: F.margin_ranking_loss(a, t([1.0]), t([1.0])),
        t([1.0]))


if __name__ == "__main__":
    saturated_losses()
