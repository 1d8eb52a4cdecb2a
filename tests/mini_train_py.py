"""The stand-in for timm's train.py, for CI: timm's train.py is not in the timm wheel nor its sdist, and CI cannot
download it. It has train.py's interface where `pkmixer train`, `pkmixer launch` and `pkmixer report` meet it — the
two parsers (``config_parser`` with ``--config``, ``parser``), ``_parse_args()``, ``main()``, train.py's defaults
(``--opt sgd``, ``--epochs 300``, ``--device cuda``, ``-j 4``), and the outputs ``<output>/<experiment>/args.yaml``,
``summary.csv`` written by timm's own ``update_summary`` and ``last.pth.tar`` (written whole, renamed from
``tmp.pth.tar`` as timm's CheckpointSaver does, with the epoch, ``version`` 2 and the arguments as an
``argparse.Namespace``, as it saves them; ``--resume`` continues from it, as train.py's does), W&B logging as
train.py starts it (``--log-wandb``) — and trains for real with timm's dataset, loader, optimizer and scheduler
factories. With ``TIMM_TRAIN_PY`` set, the tests that use it run the real train.py instead.

Stand-in only: ``--out DIR`` trains nothing and records what it was given in ``DIR/rank<RANK>.json`` (and, from rank
0, ``DIR/record.json``): its argv, the parsed values, whether timm knows the model, and its CPU threads
(`tests/test_train_command.py`); ``--fail`` raises inside training; ``--stop-after-epochs`` stops as if killed (and
``--stop-file F`` does while F exists, after the epochs F holds: a relaunch resumes the run, its recipe unchanged) and
``--epoch-sleep`` waits after each epoch, ``--epoch-gate FILE`` until FILE exists (`pkmixer launch`'s tests)."""
import argparse
import json
import os
import sys
import time

import torch
import yaml
from timm.utils import ParseKwargs, update_summary

config_parser = parser = argparse.ArgumentParser(description='Training Config', add_help=False)
parser.add_argument('-c', '--config', default='', type=str)
parser = argparse.ArgumentParser(description='stand-in for timm train.py')
parser.add_argument('--model', default='resnet50')
parser.add_argument('--model-kwargs', nargs='*', default={}, action=ParseKwargs)
parser.add_argument('--device-modules', nargs='+', default=None)
parser.add_argument('--data-dir', default='')
parser.add_argument('--train-split', default='train')
parser.add_argument('--val-split', default='validation')
parser.add_argument('--num-classes', type=int, default=None)
parser.add_argument('--img-size', type=int, default=None)
parser.add_argument('-b', '--batch-size', type=int, default=128)
parser.add_argument('--grad-accum-steps', type=int, default=1)
parser.add_argument('--opt', default='sgd')
parser.add_argument('--lr', type=float, default=None)
parser.add_argument('--lr-base', type=float, default=0.1)
parser.add_argument('--lr-base-size', type=int, default=256)
parser.add_argument('--lr-base-scale', type=str, default='')
parser.add_argument('--weight-decay', type=float, default=2e-5)
parser.add_argument('--sched', default='cosine')
parser.add_argument('--epochs', type=int, default=300)
parser.add_argument('--cooldown-epochs', type=int, default=0)
parser.add_argument('--warmup-epochs', type=int, default=0)
parser.add_argument('--seed', type=int, default=42)
parser.add_argument('--experiment', default='')
parser.add_argument('--output', default='')
parser.add_argument('-j', '--workers', type=int, default=4)  # train.py's defaults
parser.add_argument('--device', default='cuda')
parser.add_argument('--resume', default='', type=str)
parser.add_argument('--log-wandb', action='store_true', default=False)
parser.add_argument('--wandb-project', default=None, type=str)
parser.add_argument('--wandb-tags', default=[], type=str, nargs='+')
parser.add_argument('--wandb-resume-id', default='', type=str)
parser.add_argument('--pretrained', action='store_true')
parser.add_argument('--input-size', default=None, nargs=3, type=int)
parser.add_argument('--in-chans', type=int, default=None)
parser.add_argument('--crop-pct', type=float, default=None)
parser.add_argument('--out', default='', help='stand-in only: record what was given in this folder, train nothing')
parser.add_argument('--fail', action='store_true', help='stand-in only: raise inside training')
parser.add_argument('--stop-after-epochs', type=int, default=None, help='stand-in only: simulate a killed run')
parser.add_argument('--stop-file', default='', help='stand-in only: while this file exists, stop after the epochs it '
                    'holds (a killed run whose recipe a relaunch keeps)')
parser.add_argument('--epoch-sleep', type=float, default=0., help='stand-in only: seconds to wait after each epoch')
parser.add_argument('--epoch-gate', default='', help='stand-in only: after each epoch, wait until this file '
                    'exists (the test opens the gate)')


def _parse_args():
    args_config, remaining = config_parser.parse_known_args()
    if args_config.config:
        with open(args_config.config) as f:
            parser.set_defaults(**yaml.safe_load(f))
    args = parser.parse_args(remaining)
    return args, yaml.safe_dump(args.__dict__, default_flow_style=False)


def record(args: argparse.Namespace) -> None:
    """What this process was given, in ``<--out>/rank<RANK>.json`` (and ``record.json`` from rank 0)."""
    import timm
    rank = os.environ.get('RANK', '0')
    given = dict(argv=sys.argv, batch_size=args.batch_size, grad_accum_steps=args.grad_accum_steps,
                 img_size=args.img_size, input_size=args.input_size, lr=args.lr, model=args.model,
                 model_kwargs=args.model_kwargs, registered=args.model in timm.list_models(),
                 threads=torch.get_num_threads(), omp=os.environ.get('OMP_NUM_THREADS'))
    for name in [f'rank{rank}.json'] + (['record.json'] if rank == '0' else []):
        with open(os.path.join(args.out, name), 'w') as f:
            json.dump(given, f)


def main():
    import timm
    from timm.data import create_dataset, create_loader, resolve_data_config
    from timm.optim import create_optimizer_v2
    from timm.scheduler import create_scheduler_v2
    args, args_text = _parse_args()
    if args.fail:
        raise ValueError('boom inside training')
    if args.out:
        return record(args)
    # as timm's init_distributed_device: train.py's default device is cuda
    assert not args.device.startswith('cuda') or torch.cuda.is_available(), \
        'CUDA is not available but cuda was specified.'
    torch.manual_seed(args.seed)
    model = timm.create_model(args.model, num_classes=args.num_classes, **args.model_kwargs)
    out = os.path.join(args.output or 'output', args.experiment or args.model)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, 'args.yaml'), 'w') as f:
        f.write(args_text)
    cfg = resolve_data_config(vars(args), model=model)
    loaders = {}
    for split, training in ((args.train_split, True), (args.val_split, False)):
        ds = create_dataset('', root=args.data_dir, split=split, is_training=training)
        loaders[training] = create_loader(ds, input_size=cfg['input_size'], batch_size=args.batch_size,
                                          is_training=training, no_aug=True, mean=cfg['mean'], std=cfg['std'],
                                          crop_pct=1.0, num_workers=0, use_prefetcher=False)
    optimizer = create_optimizer_v2(model, args.opt, lr=args.lr or 0.01, weight_decay=args.weight_decay)
    scheduler, epochs = create_scheduler_v2(optimizer, args.sched, num_epochs=args.epochs,
                                            warmup_epochs=args.warmup_epochs, cooldown_epochs=args.cooldown_epochs)
    start_epoch = 0
    if args.resume:  # as timm.models.resume_checkpoint: model, optimizer, and the epoch after the saved one
        checkpoint = torch.load(args.resume, map_location='cpu', weights_only=False)  # as timm: args, a Namespace
        model.load_state_dict(checkpoint['state_dict'])
        optimizer.load_state_dict(checkpoint['optimizer'])
        start_epoch = checkpoint['epoch'] + 1
        print(f'Resumed from {args.resume} at epoch {start_epoch}', flush=True)
        if start_epoch > 0:
            scheduler.step(start_epoch)
    if args.log_wandb:  # as train.py
        import wandb
        assert not args.wandb_resume_id or args.resume
        wandb.init(project=args.wandb_project, name=args.experiment or args.model, config=args, tags=args.wandb_tags,
                   resume='must' if args.wandb_resume_id else None,
                   id=args.wandb_resume_id if args.wandb_resume_id else None)
    loss_fn = torch.nn.CrossEntropyLoss()
    stop = int(open(args.stop_file).read()) if args.stop_file and os.path.exists(args.stop_file) else \
        args.stop_after_epochs
    for epoch in range(start_epoch, epochs if stop is None else stop):
        model.train()
        steps = len(loaders[True])
        for i, (x, y) in enumerate(loaders[True]):
            loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(f'Train: {epoch} [{i:>4d}/{steps} ({100. * (i + 1) / steps:>3.0f}%)]  Loss: {loss.item():#.3g}',
                  flush=True)  # train.py's log line of a step
        scheduler.step(epoch + 1)
        model.eval()
        correct = total = 0
        eval_loss = 0.
        with torch.no_grad():
            for x, y in loaders[False]:
                logits = model(x)
                eval_loss += loss_fn(logits, y).item() * len(y)
                correct += (logits.argmax(-1) == y).sum().item()
                total += len(y)
        update_summary(epoch, {'loss': loss.item()}, {'loss': eval_loss / total, 'top1': 100. * correct / total},
                       filename=os.path.join(out, 'summary.csv'), lr=optimizer.param_groups[0]['lr'],
                       write_header=epoch == start_epoch, log_wandb=args.log_wandb)
        torch.save(dict(epoch=epoch, arch=args.model, state_dict=model.state_dict(), optimizer=optimizer.state_dict(),
                        version=2, args=args), os.path.join(out, 'tmp.pth.tar'))
        os.replace(os.path.join(out, 'tmp.pth.tar'), os.path.join(out, 'last.pth.tar'))  # as timm's CheckpointSaver
        print(f'epoch {epoch} done', flush=True)
        time.sleep(args.epoch_sleep)
        while args.epoch_gate and not os.path.exists(args.epoch_gate):
            time.sleep(0.1)


if __name__ == '__main__':
    main()
