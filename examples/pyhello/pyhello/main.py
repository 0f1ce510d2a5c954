"""The console script terraform-provider-pyhello: serves the provider over the plugin protocol."""

import sys

from tf.runner import run_provider

from pyhello.provider import PyHelloProvider


def main():
    run_provider(PyHelloProvider(), sys.argv)
