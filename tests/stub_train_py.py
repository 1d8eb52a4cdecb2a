"""A stand-in for timm's train.py that trains nothing: it has train.py's structure (``config_parser`` with
``--config``, ``parser``, ``_parse_args()``, ``main()``) and the arguments of the real one that `pkmixer train`
reads (batch, learning rate, input size, model), and records what it was given in ``<--out>/rank<RANK>.json``
(and, from rank 0, ``<--out>/record.json``): its argv, the parsed values, whether timm knows the model, and its
CPU threads. ``--fail`` raises inside training. `tests/test_train_command.py` writes it as the ``train.py`` it
launches; ``tests/mini_train_py.py`` is the stand-in that trains for real."""
import argparse
import json
import os
import sys

import yaml
from timm.utils import ParseKwargs

config_parser = parser = argparse.ArgumentParser(description='Training Config', add_help=False)
parser.add_argument('-c', '--config', default='', type=str)
parser = argparse.ArgumentParser(description='stand-in for timm train.py')
parser.add_argument('--model', default='resnet50')
parser.add_argument('--pretrained', action='store_true')
parser.add_argument('-b', '--batch-size', type=int, default=128)
parser.add_argument('--grad-accum-steps', type=int, default=1)
parser.add_argument('--lr', type=float, default=None)
parser.add_argument('--lr-base', type=float, default=0.1)
parser.add_argument('--lr-base-size', type=int, default=256)
parser.add_argument('--lr-base-scale', type=str, default='')
parser.add_argument('--opt', default='sgd')
parser.add_argument('--sched', default='cosine')
parser.add_argument('--epochs', type=int, default=300)
parser.add_argument('--num-classes', type=int, default=None)
parser.add_argument('--img-size', type=int, default=None)
parser.add_argument('--input-size', default=None, nargs=3, type=int)
parser.add_argument('--in-chans', type=int, default=None)
parser.add_argument('--crop-pct', type=float, default=None)
parser.add_argument('--model-kwargs', nargs='*', default={}, action=ParseKwargs)
parser.add_argument('--device-modules', nargs='+', default=None)
parser.add_argument('--out', default='')
parser.add_argument('--fail', action='store_true')


def _parse_args():
    args_config, remaining = config_parser.parse_known_args()
    if args_config.config:
        with open(args_config.config) as f:
            parser.set_defaults(**yaml.safe_load(f))
    args = parser.parse_args(remaining)
    return args, yaml.safe_dump(args.__dict__)


def main():
    import torch
    args, _ = _parse_args()
    if args.fail:
        raise ValueError('boom inside training')
    import timm
    rank = os.environ.get('RANK', '0')
    record = dict(argv=sys.argv, batch_size=args.batch_size, grad_accum_steps=args.grad_accum_steps,
                  img_size=args.img_size, input_size=args.input_size, lr=args.lr, model=args.model,
                  model_kwargs=args.model_kwargs, registered=args.model in timm.list_models(),
                  threads=torch.get_num_threads(), omp=os.environ.get('OMP_NUM_THREADS'))
    for name in [f'rank{rank}.json'] + (['record.json'] if rank == '0' else []):
        with open(os.path.join(args.out, name), 'w') as f:
            json.dump(record, f)


if __name__ == '__main__':
    main()
