"""The pil backend's decoding workers: shared-memory batch slots, the crop cache, the JPEG region decoder
(a C extension, ``_jpeg_region``) and the stop-signal relay.
"""
