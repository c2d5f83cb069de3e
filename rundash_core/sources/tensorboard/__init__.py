"""TensorBoard runs (`docs/formats/tensorboard.md`): folders of `events.out.tfevents.*` files, as
verl's `tensorboard` logger, HF Trainer and any `SummaryWriter` write them. `events` frames and
decodes records from a byte offset, `event_file` follows one file as it grows, `merge` builds the
run's tidy metrics from its files, `run` is the `Run`, `demo_run` writes the demo's run."""
