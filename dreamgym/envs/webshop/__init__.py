"""WebShop, re-implemented offline: catalog loader, goals, BM25 search, pages, reward and the env."""

from dreamgym.envs.webshop.env import WebShopEnv

__all__ = ["WebShopEnv"]
