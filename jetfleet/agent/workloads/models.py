"""The DNNs jetfleet trains, written with plain torch (no torchvision: there is no CPU wheel here
and the agent should not need it). Each builder takes a ``scale`` so tests can train a tiny copy
of the same architecture; scale 1.0 is the published shape."""

from __future__ import annotations

import torch
from torch import nn


def _ch(c: int, scale: float) -> int:
    return max(4, int(round(c * scale / 4)) * 4)


# --- ResNet-18 ------------------------------------------------------------------------------------
class _Basic(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


def resnet18(num_classes: int = 1000, scale: float = 1.0) -> nn.Module:
    """ResNet-18 for ``num_classes``; ``scale`` narrows the channels (1.0 is the published width)."""
    w = [_ch(c, scale) for c in (64, 128, 256, 512)]
    layers: list[nn.Module] = [nn.Conv2d(3, w[0], 7, 2, 3, bias=False), nn.BatchNorm2d(w[0]), nn.ReLU(),
                               nn.MaxPool2d(3, 2, 1)]
    cin = w[0]
    for i, c in enumerate(w):
        layers += [_Basic(cin, c, 1 if i == 0 else 2), _Basic(c, c, 1)]
        cin = c
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes)]
    return nn.Sequential(*layers)


# --- MobileNetV3-Large ----------------------------------------------------------------------------
class _SE(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        mid = _ch(c // 4, 1.0)
        self.f = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, mid, 1), nn.ReLU(),
                               nn.Conv2d(mid, c, 1), nn.Hardsigmoid())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.f(x)


class _InvRes(nn.Module):
    def __init__(self, cin: int, k: int, exp: int, cout: int, se: bool, hs: bool, stride: int) -> None:
        super().__init__()
        act: type[nn.Module] = nn.Hardswish if hs else nn.ReLU
        layers: list[nn.Module] = []
        if exp != cin:
            layers += [nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), act()]
        layers += [nn.Conv2d(exp, exp, k, stride, k // 2, groups=exp, bias=False), nn.BatchNorm2d(exp), act()]
        if se:
            layers.append(_SE(exp))
        layers += [nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.f = nn.Sequential(*layers)
        self.res = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.f(x)
        return x + y if self.res else y


# (kernel, expansion, out, squeeze-excite, hardswish, stride) of MobileNetV3-Large.
_MBV3_L = [(3, 16, 16, False, False, 1), (3, 64, 24, False, False, 2), (3, 72, 24, False, False, 1),
           (5, 72, 40, True, False, 2), (5, 120, 40, True, False, 1), (5, 120, 40, True, False, 1),
           (3, 240, 80, False, True, 2), (3, 200, 80, False, True, 1), (3, 184, 80, False, True, 1),
           (3, 184, 80, False, True, 1), (3, 480, 112, True, True, 1), (3, 672, 112, True, True, 1),
           (5, 672, 160, True, True, 2), (5, 960, 160, True, True, 1), (5, 960, 160, True, True, 1)]


def mobilenet_v3(num_classes: int = 1000, scale: float = 1.0) -> nn.Module:
    """MobileNetV3-Large for ``num_classes``; ``scale`` narrows the channels (1.0 is the published width)."""
    cin = _ch(16, scale)
    layers: list[nn.Module] = [nn.Conv2d(3, cin, 3, 2, 1, bias=False), nn.BatchNorm2d(cin), nn.Hardswish()]
    for k, exp, out, se, hs, s in _MBV3_L:
        exp_c, out_c = _ch(exp, scale), _ch(out, scale)
        layers.append(_InvRes(cin, k, exp_c, out_c, se, hs, s))
        cin = out_c
    last = _ch(960, scale)
    layers += [nn.Conv2d(cin, last, 1, bias=False), nn.BatchNorm2d(last), nn.Hardswish(),
               nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(last, _ch(1280, scale)), nn.Hardswish(),
               nn.Dropout(0.2), nn.Linear(_ch(1280, scale), num_classes)]
    return nn.Sequential(*layers)


# --- YOLOv8n-style detector -----------------------------------------------------------------------
class _Conv(nn.Sequential):
    def __init__(self, cin: int, cout: int, k: int = 1, s: int = 1) -> None:
        super().__init__(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout), nn.SiLU())


class _C2f(nn.Module):
    def __init__(self, cin: int, cout: int, n: int, shortcut: bool) -> None:
        super().__init__()
        self.h = cout // 2
        self.cv1 = _Conv(cin, 2 * self.h)
        self.m = nn.ModuleList(nn.Sequential(_Conv(self.h, self.h, 3), _Conv(self.h, self.h, 3))
                               for _ in range(n))
        self.cv2 = _Conv((2 + n) * self.h, cout)
        self.shortcut = shortcut

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ys = list(self.cv1(x).chunk(2, 1))
        for m in self.m:
            y = m(ys[-1])
            ys.append(ys[-1] + y if self.shortcut else y)
        return self.cv2(torch.cat(ys, 1))


class _SPPF(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.cv1, self.cv2 = _Conv(c, c // 2), _Conv(c * 2, c)
        self.pool = nn.MaxPool2d(5, 1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.cv1(x)
        b = self.pool(a)
        c = self.pool(b)
        return self.cv2(torch.cat([a, b, c, self.pool(c)], 1))


class YoloV8n(nn.Module):
    """Backbone, PAN neck and a decoupled head at three strides, with YOLOv8n's widths (depth 0.33,
    width 0.25). Outputs per stride: 4 box + ``num_classes`` scores per cell."""

    def __init__(self, num_classes: int = 80, scale: float = 1.0) -> None:
        super().__init__()
        c = [_ch(x, scale) for x in (16, 32, 64, 128, 256)]
        self.stem = nn.Sequential(_Conv(3, c[0], 3, 2), _Conv(c[0], c[1], 3, 2), _C2f(c[1], c[1], 1, True))
        self.p3 = nn.Sequential(_Conv(c[1], c[2], 3, 2), _C2f(c[2], c[2], 2, True))
        self.p4 = nn.Sequential(_Conv(c[2], c[3], 3, 2), _C2f(c[3], c[3], 2, True))
        self.p5 = nn.Sequential(_Conv(c[3], c[4], 3, 2), _C2f(c[4], c[4], 1, True), _SPPF(c[4]))
        self.up = nn.Upsample(scale_factor=2.0, mode="nearest")
        self.n4 = _C2f(c[4] + c[3], c[3], 1, False)
        self.n3 = _C2f(c[3] + c[2], c[2], 1, False)
        self.d3, self.m4 = _Conv(c[2], c[2], 3, 2), _C2f(c[2] + c[3], c[3], 1, False)
        self.d4, self.m5 = _Conv(c[3], c[3], 3, 2), _C2f(c[3] + c[4], c[4], 1, False)
        self.heads = nn.ModuleList(
            nn.Sequential(_Conv(ci, c[2], 3), _Conv(c[2], c[2], 3), nn.Conv2d(c[2], 4 * 16 + num_classes, 1))
            for ci in (c[2], c[3], c[4]))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """The head outputs at strides 8, 16 and 32, each (batch, 64 + ``num_classes``, H, W)."""
        x3 = self.p3(self.stem(x))
        x4 = self.p4(x3)
        x5 = self.p5(x4)
        n4 = self.n4(torch.cat([self.up(x5), x4], 1))
        o3 = self.n3(torch.cat([self.up(n4), x3], 1))
        o4 = self.m4(torch.cat([self.d3(o3), n4], 1))
        o5 = self.m5(torch.cat([self.d4(o4), x5], 1))
        return [h(o) for h, o in zip(self.heads, (o3, o4, o5))]


def yolo_v8n(num_classes: int = 80, scale: float = 1.0) -> nn.Module:
    """The YOLOv8n-style detector for ``num_classes``; ``scale`` narrows the channels (1.0 is the published width)."""
    return YoloV8n(num_classes, scale)


# --- BERT-base ------------------------------------------------------------------------------------
class Bert(nn.Module):
    """A BERT encoder with a SQuAD-style head: token and position embeddings, transformer layers, start/end logits."""

    def __init__(self, vocab: int = 30522, hidden: int = 768, layers: int = 12, heads: int = 12,
                 ff: int = 3072, max_len: int = 512) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_len, hidden)
        self.norm = nn.LayerNorm(hidden)
        layer = nn.TransformerEncoderLayer(hidden, heads, ff, dropout=0.1, activation="gelu",
                                           batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.qa = nn.Linear(hidden, 2)  # SQuAD-style start/end logits

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Start and end logits per token, (batch, sequence, 2), of token ids (batch, sequence)."""
        pos = torch.arange(ids.shape[1], device=ids.device)
        return self.qa(self.enc(self.norm(self.tok(ids) + self.pos(pos))))


def bert_base(scale: float = 1.0) -> nn.Module:
    """BERT-base at ``scale`` 1.0; below it, a 2-layer, 2-head copy with a 1000-token vocabulary for tests."""
    if scale >= 1.0:
        return Bert()
    return Bert(vocab=1000, hidden=_ch(768, scale), layers=2, heads=2, ff=_ch(3072, scale), max_len=128)


# --- LSTM language model --------------------------------------------------------------------------
class LstmLM(nn.Module):
    """A word-level LSTM language model: an embedding, ``layers`` LSTM layers of ``hidden`` units, vocabulary logits."""

    def __init__(self, vocab: int = 10000, hidden: int = 300, layers: int = 2) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.rnn = nn.LSTM(hidden, hidden, layers, batch_first=True, dropout=0.2)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Next-token logits at every position, (batch, sequence, vocab), of token ids (batch, sequence)."""
        y, _ = self.rnn(self.emb(ids))
        return self.out(y)


def lstm(scale: float = 1.0) -> nn.Module:
    """The 2-layer, 300-unit LSTM language model at ``scale`` 1.0; below it, a narrower 500-word copy for tests."""
    return LstmLM() if scale >= 1.0 else LstmLM(vocab=500, hidden=_ch(200, scale), layers=2)
