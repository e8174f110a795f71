"""The loss and accuracy curves of a training run, and of its float32 reference, as a PNG.

matplotlib is a development extra (``pip install 'tpugen[dev]'``), imported when a plot is
drawn: ``RuntimeError`` without it.
"""

from pathlib import Path

__all__ = ["plot_curves"]


def plot_curves(path, runs: dict, title: str = "") -> Path:
    """Draw ``runs`` (label -> list of ``EpochStats``) to the PNG ``path``: the training loss
    (each step, and each epoch's mean at the epoch's end) on the left; the training and test
    accuracy per epoch on the right. Returns the path."""
    try:
        import matplotlib  # deferred: a development extra, only the plot needs it
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError as e:
        raise RuntimeError("drawing the curves needs matplotlib (pip install "
                           "'tpugen[dev]')") from e
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    for (label, history), color in zip(runs.items(), ("tab:blue", "tab:orange", "tab:green"),
                                       strict=False):
        epochs = [s.epoch for s in history]
        steps = [(s.epoch - 1 + (i + 1) / len(s.step_losses), v)
                 for s in history for i, v in enumerate(s.step_losses)]
        if steps:
            ax_loss.plot(*zip(*steps, strict=True), "-", color=color, alpha=0.3, lw=0.8)
        ax_loss.plot(epochs, [s.loss for s in history], "o-", color=color,
                     label=f"{label} (epoch mean; thin: each step)")
        ax_acc.plot(epochs, [100 * s.train_acc for s in history], "o--", color=color,
                    label=f"{label}, train")
        test = [(s.epoch, 100 * s.test_acc) for s in history if s.test_acc is not None]
        if test:
            ax_acc.plot(*zip(*test, strict=True), "o-", color=color, label=f"{label}, test")
    ax_loss.set(xlabel="epoch", ylabel="training loss (cross-entropy)", title="loss")
    ax_acc.set(xlabel="epoch", ylabel="accuracy (%)", title="accuracy")
    for ax in (ax_loss, ax_acc):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
