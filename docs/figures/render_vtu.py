"""Renders a prediction file of `ono predict --format vtu` the way ParaView shows it (VTK's own
renderer, offscreen, through pyvista): the target, the prediction and the error of one field on
the sample's mesh, side by side, edges drawn. The picture of docs/data.md, "Your own data".

    python3 render_vtu.py predictions/sample_0007.vtu u out.png

Needs `pip install pyvista vtk` (VTK 9.7.2 and pyvista 0.49.1 made the committed picture).
"""
import sys

import pyvista as pv

path, field, out = sys.argv[1], sys.argv[2], sys.argv[3]
mesh = pv.read(path)
p = pv.Plotter(shape=(1, 3), off_screen=True, window_size=(1200, 430), border=False)
for i, (suffix, cmap) in enumerate(
    [("target", "viridis"), ("prediction", "viridis"), ("error", "coolwarm")]
):
    p.subplot(0, i)
    name = f"{field}_{suffix}"
    clim = None
    if suffix != "error":
        # Target and prediction on one colour scale.
        lo = min(mesh[f"{field}_target"].min(), mesh[f"{field}_prediction"].min())
        hi = max(mesh[f"{field}_target"].max(), mesh[f"{field}_prediction"].max())
        clim = (lo, hi)
    else:
        m = abs(mesh[name]).max()
        clim = (-m, m)
    p.add_mesh(
        mesh.copy(),
        scalars=name,
        cmap=cmap,
        clim=clim,
        show_edges=True,
        edge_color="grey",
        scalar_bar_args={"title": name, "fmt": "%.2e", "n_labels": 3},
    )
    p.view_xy()
    p.camera.zoom(1.25)
p.screenshot(out)
print(f"wrote {out}")
