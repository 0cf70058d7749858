// libmosquitto (Debian libmosquitto-dev, 2.0), the MQTT client of the `mqtt` sink.
// Only Plugins/MQTTOutput/MQTTConnection.swift talks to it.
#include <mosquitto.h>
#include <mqtt_protocol.h>
