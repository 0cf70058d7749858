-- Ignition from the supply voltage: a vehicle's battery reads above about 13.2 V while the
-- engine runs (the alternator charges it). For the `lua` transform.
function process(position, state)
  local volts = tonumber(position.attributes.power) or 0
  position.attributes.ignition = volts > 13.2 and "true" or "false"
  return position
end
