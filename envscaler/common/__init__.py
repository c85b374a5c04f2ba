"""Host-side helpers shared by the gateway (`server`), the host half of `sandbox` and `synth`.

Neither the in-sandbox runtime (`envscaler.sandbox.runtime`: standard library only, it runs in the image)
nor the client package (`envscaler_client`: installed alone) imports it; each has its own.
"""
