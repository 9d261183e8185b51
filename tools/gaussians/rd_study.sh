#!/usr/bin/env bash
# The Gaussian codecs' rate-distortion study of docs/results.md, from nothing: four real inputs (the stereo pair and
# an mv-scenes lidar sweep, each initialised as 3DGS does and fitted to its neighbours) with their held-out cameras,
# every codec at step scales 0.5, 1 and 2, and one report per input with attribute and rendered quality, written to
# models/gaussians_<input>.{json,csv,png}. One thread per process, as measured; the tri-plane rows take ~1 hour.
#
#   bash tools/gaussians/rd_study.sh [WORK_DIR]        # default work_dirs/gaussians; needs datasets/mv-scenes
set -euo pipefail
cd "$(dirname "$0")/../.."
work=${1:-work_dirs/gaussians}
vispe=(python -m vispe)
export OMP_NUM_THREADS=1
mkdir -p "$work"
"${vispe[@]}" gaussians-from-points stereo-motorcycle "$work/motorcycle_init.ply" \
    --cameras "$work/motorcycle.cameras.json"
"${vispe[@]}" gaussians-from-points stereo-motorcycle "$work/motorcycle_fit.ply" --fit neighbours
"${vispe[@]}" gaussians-from-points datasets/mv-scenes "$work/mv-scene0_init.ply" --sample 0 \
    --cameras "$work/mv-scene0.cameras.json"
"${vispe[@]}" gaussians-from-points datasets/mv-scenes "$work/mv-scene0_fit.ply" --sample 0 --fit neighbours
for scene in motorcycle_init motorcycle_fit mv-scene0_init mv-scene0_fit; do
  "${vispe[@]}" compress "$work/$scene.ply" "$work/${scene}_float16.vgs" --codec float16 --quiet
  for step in 0.5 1 2; do
    "${vispe[@]}" compress "$work/$scene.ply" "$work/${scene}_factorized_s$step.vgs" --codec factorized \
        --step-scale $step --quiet
    case $scene in
      mv-scene0*)   # the context model sized by the scene (C 4, R 16) and a larger one
        "${vispe[@]}" compress "$work/$scene.ply" "$work/${scene}_triplane-small_s$step.vgs" --step-scale $step \
            --steps 2000 --quiet
        "${vispe[@]}" compress "$work/$scene.ply" "$work/${scene}_triplane_s$step.vgs" --step-scale $step \
            --steps 2000 --tri-channels 16 --tri-resolution 32 --quiet ;;
      *)
        "${vispe[@]}" compress "$work/$scene.ply" "$work/${scene}_triplane_s$step.vgs" --step-scale $step \
            --steps 2000 --quiet ;;
    esac
  done
  cameras=$work/${scene%_*}.cameras.json
  "${vispe[@]}" gaussians-report "$work/$scene.ply" "$work/${scene}"_*.vgs --cameras "$cameras" \
      --out "models/gaussians_${scene/_/-}"
done
