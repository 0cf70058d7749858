// PROJ (libproj-dev, PROJ ≥ 8) for the `coordinates` transform: EPSG coordinate reference
// systems. Only Plugins/Coordinates/ProjTransformer.swift talks to it.
#include <proj.h>
