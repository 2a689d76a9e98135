import torch
def get_model(:
    pass
