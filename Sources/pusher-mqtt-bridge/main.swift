print("pusher-mqtt-bridge")
