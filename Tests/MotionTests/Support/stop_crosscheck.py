#!/usr/bin/env python3
"""Stops in recorded GPX tracks as an independent implementation finds them: MovingPandas'
TrajectoryStopDetector (a stop: the fixes stay within a diameter for at least a duration).

Writes the JSON that Tests/MotionTests/Fixtures/movingpandas-stops.json holds; MotionTests'
StopCrossCheckTests runs the `motion` transform on the same files and compares every stop at
least `min_duration` long. Run it again (and commit its output) when the tracks or the
parameters change:

    python3 -m venv /tmp/mp && /tmp/mp/bin/pip install movingpandas==0.23.0
    /tmp/mp/bin/python Tests/MotionTests/Support/stop_crosscheck.py > Tests/MotionTests/Fixtures/movingpandas-stops.json

The GPX files are gpxpy's test files (Apache-2.0), kept in Tests/FileInputTests/Fixtures/gpx.
The track points are read with the standard library's XML parser, in file order.
"""
import datetime
import json
import os
import sys
import warnings
import xml.etree.ElementTree as ET

import geopandas
import movingpandas
import pandas
import shapely

HERE = os.path.dirname(os.path.abspath(__file__))
GPX = os.path.normpath(os.path.join(HERE, "../../FileInputTests/Fixtures/gpx"))
FILES = ["cerknicko-jezero.gpx", "around-visnjan-with-car.gpx"]
# (max_diameter metres, min_duration seconds): the motion transform runs with stop_radius_m =
# max_diameter / 2 and min_stop_duration = min_duration.
PARAMETERS = [(100, 120), (100, 180), (60, 60), (200, 300)]


def points(path):
    root = ET.parse(path).getroot()
    out = []
    for pt in root.iter():
        if pt.tag.split("}")[-1] != "trkpt":
            continue
        time = next((c.text for c in pt if c.tag.split("}")[-1] == "time"), None)
        if time is None:
            continue
        # UTC, without a zone (MovingPandas drops zones anyway).
        t = datetime.datetime.fromisoformat(time.replace("Z", "+00:00")).astimezone(datetime.timezone.utc).replace(tzinfo=None)
        out.append((t, float(pt.get("lat")), float(pt.get("lon"))))
    return out


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def main():
    warnings.simplefilter("ignore")
    result = {
        "command": "python3 Tests/MotionTests/Support/stop_crosscheck.py",
        "library": f"movingpandas {movingpandas.__version__} (geopandas {geopandas.__version__}, shapely {shapely.__version__}, pandas {pandas.__version__})",
        "detector": "TrajectoryStopDetector(traj).get_stop_time_ranges(max_diameter, timedelta(seconds=min_duration))",
        "runs": [],
    }
    for name in FILES:
        pts = points(os.path.join(GPX, name))
        df = pandas.DataFrame({"t": [p[0] for p in pts], "geometry": [shapely.Point(p[2], p[1]) for p in pts]}).set_index("t")
        gdf = geopandas.GeoDataFrame(df, crs="EPSG:4326")
        traj = movingpandas.Trajectory(gdf, name)
        for diameter, duration in PARAMETERS:
            ranges = movingpandas.TrajectoryStopDetector(traj).get_stop_time_ranges(
                max_diameter=diameter, min_duration=datetime.timedelta(seconds=duration))
            result["runs"].append({
                "file": name, "max_diameter_m": diameter, "min_duration_s": duration,
                "stops": [{"start": iso(r.t_0), "end": iso(r.t_n)} for r in ranges],
            })
    json.dump(result, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
