#!/usr/bin/env python3
"""Prints PyTorch's answers for the regression cases in tests/test_crash_results.cpp
(issue 15, items 4-15). The C++ tests hold these values inline; rerun this script (Debian's
python3-torch) to check them:  /usr/bin/python3 tests/gen_regression_values.py
"""
import torch
import torch.nn.functional as F


def show(name, value):
    print(f"{name}: {value}")


def main():
    torch.manual_seed(0)
    # item 4: linear with in_features == 0 is the bias on every row (also after ReLU)
    bias = torch.tensor([1.0, -2.0, 3.0])
    show("linear(zeros(2,0), zeros(3,0), bias)", F.linear(torch.zeros(2, 0), torch.zeros(3, 0), bias).tolist())
    show("relu(...)", F.relu(F.linear(torch.zeros(2, 0), torch.zeros(3, 0), bias)).tolist())
    # item 5: an empty index selects an empty slice
    show("index_select(ones(2,3), 1, []).shape",
         list(torch.index_select(torch.ones(2, 3), 1, torch.tensor([], dtype=torch.long)).shape))
    # item 6: nll_loss (mean) with every target ignored: loss nan, gradients zero
    x = torch.randn(3, 4, requires_grad=True)
    loss = F.nll_loss(torch.log_softmax(x, 1), torch.full((3,), -100))
    loss.backward()
    show("nll_loss all ignored", loss.item())
    show("its gradient", x.grad.tolist())
    y = torch.zeros(2, 2, requires_grad=True)
    l2 = F.nll_loss(y, torch.tensor([1, 5]), ignore_index=5)
    l2.backward()
    show("nll_loss partly ignored", (l2.item(), y.grad.tolist()))
    # item 13: pow gradients at a zero base
    a = torch.tensor([0.0, 0.0, 2.0, 0.0], requires_grad=True)
    b = torch.tensor([0.0, 2.0, 3.0, -1.0], requires_grad=True)
    p = torch.pow(a, b)
    p.sum().backward()
    show("pow", p.tolist())
    show("d/da", a.grad.tolist())
    show("d/db", b.grad.tolist())
    # item 14: log_softmax of large f32 inputs
    ls = torch.log_softmax(torch.tensor([1e4, 1e4 + 1, 1e4 + 2]), 0)
    show("log_softmax([1e4, 1e4+1, 1e4+2])", ["%.9g" % v for v in ls.tolist()])
    show("cross_entropy probs", "%.9g" % F.cross_entropy(torch.tensor([[1e4, 1e4 + 1, 1e4 + 2]]),
                                                         torch.tensor([[0.0, 0.0, 1.0]])).item())
    # item 15: integer sums are i64
    s = torch.tensor([2**31 - 1, 1], dtype=torch.int32).sum()
    show("sum(i32 [2^31-1, 1])", (s.item(), str(s.dtype)))
    show("sum(u8 [200, 100])", torch.tensor([200, 100], dtype=torch.uint8).sum().item())
    show("sum(bool).dtype", str(torch.tensor([True, True, False]).sum().dtype))
    # item 12: softmax of an empty tensor that requires grad keeps requires_grad
    show("softmax(empty).requires_grad", torch.softmax(torch.zeros(0, 3, requires_grad=True), 1).requires_grad)


if __name__ == "__main__":
    main()
