"""The composition root: reads settings, builds the store, the learning services, the command
bus and the configured surfaces, and owns the `learning-bot` entry point.

It is the only package that imports every layer (engine, storage, bot, adapters); none of them
imports it."""
