// Logger.h: the little of Kineto's logger that IpcFabricConfigClient.cpp and
// FabricManager.h use, to stderr (Kineto's own pulls in its observers).
#pragma once
#include <iostream>

namespace libkineto {
enum LoggerOutputType { VERBOSE = 0, INFO, WARNING, STAGE, ERROR };
}
#define LOG(severity) (std::cerr << "[kineto " #severity "] ")
#define LOG_EVERY_N(severity, n) LOG(severity)
#define PLOG(severity) LOG(severity)
#define VLOG(level) LOG(VERBOSE)
