"""The decoding backends: each turns this rank's samples into uint8 crops (decoded.py is their contract).

pil.py decodes with Pillow(-SIMD) in DataLoader worker processes, whose machinery is in workers/;
dali.py decodes with NVIDIA DALI, on the GPU where there is one. ``build_loader`` picks one.
"""
